"""The original harness's event vocabulary, mapped to dshkit's and back.

Every mapping here is the inverse of its partner: `to_dshkit_*` renames the original's camelCase
and kebab-case names (`tool-call`, `callId`, `next-turn`, `max-tokens`, ...) to dshkit's, and
`to_original_*` undoes exactly that, so a record read and written again is the same record.
Anything neither side names (unknown blocks, plugin source fields, chunk payloads, the data of
the original's own event types) passes through unchanged.
"""

from __future__ import annotations

import re
from functools import partial
from collections.abc import Callable, Mapping
from typing import Any

from dshkit import FrozenDict, Message, freeze, freeze_message
from dshkit.session.compactions import COMPACT_PLUGIN, COMPACTION_ID
from dshkit.session.events import APPROVAL_OUTCOMES, APPROVAL_POLICIES

# The 48 event types the original knows (`known-event-types.ts`); none of them blocks its fold.
ORIGINAL_EVENT_TYPES = frozenset(
    """agent-preset/selected agent/inbox/spliced approval/asked approval/decided approval/policy
    assistant/chunk assistant/message command/done command/run compaction/end compaction/prune
    compaction/start compaction/summary feedback/record goal/change hook/invoked hook/result llm/retry
    llm/retry-started permission/preset plan/mode request/context request/header sandbox/mode
    schedule/change session/end-seed session/title session/title-llm-request step/end step/start
    subagent/descriptor team/member team/message/delivered team/message/queued team/task todo/write
    tool-workflow/agent-end tool-workflow/agent-start tool-workflow/run-end tool-workflow/run-start
    tool/call tool/code-dispatch tool/code-dispatch-start tool/result turn/end turn/start
    user/message web/deepseek-search-llm-request""".split()
)

# dshkit's own vocabulary: these types are mapped; the original's other known types are presented
# with `data.ignorable = True` (dshkit's way of saying "derivation may skip this").
DSHKIT_MAPPED_TYPES = frozenset(
    """user/message assistant/message tool/result turn/start turn/end step/start step/end
    assistant/chunk tool/call request/header agent/inbox/spliced compaction/start compaction/summary
    compaction/prune compaction/end approval/asked approval/decided approval/policy""".split()
)

OMITTED_IS_ERROR = "is_error_omitted"
"""Set on a `tool_result` block whose original `tool-result` block had no `isError` key."""

_USAGE = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "cacheReadTokens": "cache_read_tokens",
    "cacheWriteTokens": "cache_write_tokens",
    "reasoningTokens": "reasoning_tokens",
}
_USAGE_BACK = {value: key for key, value in _USAGE.items()}
_CALL_ID = {"callId": "call_id"}
_TARGETS = {"next-turn": "next_turn", "next-step": "next_step"}
_TARGETS_BACK = {value: key for key, value in _TARGETS.items()}
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
_SNAKE = re.compile(r"_([a-z0-9])")


def snake_key(key: str) -> str:
    """`maxTokens` -> `max_tokens` (keys already without capitals are kept)."""
    return _CAMEL.sub(lambda match: "_" + match.group(1).lower(), key)


def camel_key(key: str) -> str:
    """`max_tokens` -> `maxTokens`."""
    return _SNAKE.sub(lambda match: match.group(1).upper(), key)


# -- messages ---------------------------------------------------------------------------------


_RESULT_KEYS = frozenset(("toolCallId", "isError", "content"))
_ATTACHED = frozenset(("image", "file"))  # blocks that may refer to an attachment


def _attachment_to_dshkit(reference: Mapping[str, Any]) -> dict[str, Any]:
    # {attachmentId, mediaType, bytes, width, height, name?, originalDimensions?}: same order
    return {("id" if key == "attachmentId" else snake_key(key)): reference[key] for key in reference}


def _attachment_to_original(reference: Mapping[str, Any]) -> dict[str, Any]:
    return {("attachmentId" if key == "id" else camel_key(key)): reference[key] for key in reference}



def _block_to_dshkit(block: Any) -> Any:
    # Keys are copied by iterating the mapping: FrozenDict's own iteration is native, while
    # `items()`, `dict(...)` and `{**...}` go through the slow generic Mapping protocol.
    if type(block) is not FrozenDict and not isinstance(block, Mapping):
        return block
    kind = block.get("type")
    if kind == "tool-call":
        out = {key: block[key] for key in block}
        out["type"] = "tool_call"
        return out
    if kind in _ATTACHED and isinstance(block.get("attachment"), Mapping):
        out = {key: block[key] for key in block}
        out["attachment"] = _attachment_to_dshkit(block["attachment"])
        return out
    if kind == "tool-result":
        out = {key: block[key] for key in block if key not in _RESULT_KEYS}
        out["type"] = "tool_result"
        out["tool_call_id"] = block.get("toolCallId")
        out["content"] = [_block_to_dshkit(item) for item in block.get("content", ())]
        if "isError" in block:
            out["is_error"] = block["isError"]
        else:
            out["is_error"] = False
            out[OMITTED_IS_ERROR] = True
        return out
    return block


def _block_to_original(block: Any) -> Any:
    if not isinstance(block, Mapping):
        return block
    kind = block.get("type")
    if kind == "tool_call":
        return {**block, "type": "tool-call"}
    if kind in _ATTACHED and isinstance(block.get("attachment"), Mapping):
        return {**block, "attachment": _attachment_to_original(block["attachment"])}
    if kind == "tool_result":
        out = {
            key: value
            for key, value in block.items()
            if key not in ("tool_call_id", "is_error", "content", OMITTED_IS_ERROR)
        }
        out["type"] = "tool-result"
        out["toolCallId"] = block.get("tool_call_id")
        out["content"] = [_block_to_original(item) for item in block.get("content", ())]
        if not block.get(OMITTED_IS_ERROR):
            out["isError"] = block.get("is_error")
        return out
    return block


# A compaction's summary (`{kind: plugin, plugin: compact}`) names its compaction: the original's
# checkpoint check refuses a summary without a `compactionId` matching its `compaction/start`.
_CHECKPOINT_KEYS = {"compactionId": COMPACTION_ID, "sourceCommandId": "source_command_id"}
_CHECKPOINT_KEYS_BACK = {value: key for key, value in _CHECKPOINT_KEYS.items()}


def _is_checkpoint(source: Mapping[str, Any]) -> bool:
    return source.get("kind") == "plugin" and source.get("plugin") == COMPACT_PLUGIN


def _source_to_dshkit(source: Mapping[str, Any]) -> Any:
    kind = source.get("kind")
    if kind == "tool" and "callId" in source:
        return {("call_id" if key == "callId" else key): source[key] for key in source}
    if kind == "model" and "replayState" in source:
        return {("replay_state" if key == "replayState" else key): source[key] for key in source}
    if _is_checkpoint(source) and not _CHECKPOINT_KEYS_BACK.keys() & set(source):
        return _rename(source, _CHECKPOINT_KEYS)
    return source


def _source_to_original(source: Mapping[str, Any]) -> Any:
    kind = source.get("kind")
    if kind == "tool" and "call_id" in source:
        out = {key: value for key, value in source.items() if key != "call_id"}
        out["callId"] = source["call_id"]
        return out
    if kind == "model" and "replay_state" in source:
        out = {key: value for key, value in source.items() if key != "replay_state"}
        out["replayState"] = source["replay_state"]
        return out
    if _is_checkpoint(source) and not _CHECKPOINT_KEYS.keys() & set(source):
        return _rename(source, _CHECKPOINT_KEYS_BACK)
    return source


_RENAMED_BLOCKS = frozenset(("tool-call", "tool-result", *_ATTACHED))


def message_to_dshkit(raw: Mapping[str, Any]) -> Message:
    """The original's message mapping as a dshkit `Message` with the same id."""
    source, content = raw["source"], raw["content"]
    kind = source.get("kind")
    renamed_blocks = False
    for block in content:
        if type(block) is not FrozenDict or block.get("type") in _RENAMED_BLOCKS:
            renamed_blocks = True
            break
    if not renamed_blocks and kind != "tool" and (kind != "model" or "replayState" not in source) and not _is_checkpoint(source):
        return freeze_message(raw)  # nothing to rename
    return freeze_message(
        {
            "id": raw["id"],
            "role": raw["role"],
            "content": [_block_to_dshkit(block) for block in content] if renamed_blocks else content,
            "source": _source_to_dshkit(source),
        }
    )


def message_to_original(message: Message) -> dict[str, Any]:
    """A dshkit `Message` as the original's message mapping (same id)."""
    return {
        "content": [_block_to_original(block) for block in message.content],
        "source": _source_to_original(message.source),
        "role": message.role,
        "id": message.id,
    }


# -- event data -------------------------------------------------------------------------------


def _rename(mapping: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    get = names.get
    return {get(key, key): mapping[key] for key in mapping}


def _header_to_dshkit(header: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in header.items() if key not in ("config", "adapterDefaults")}
    config = dict(header.get("config") or {})
    # provider and model route the request; dshkit keeps them beside the config, not in the body.
    for key in ("provider", "model"):
        if key in config:
            out[key] = config.pop(key)
    out["config"] = {snake_key(key): value for key, value in config.items()}
    if "adapterDefaults" in header:
        out["adapter_defaults"] = {snake_key(key): value for key, value in header["adapterDefaults"].items()}
    return out


def _header_to_original(header: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in header.items() if key not in ("config", "adapter_defaults", "provider", "model")}
    config = {key: header[key] for key in ("provider", "model") if key in header}
    config.update((camel_key(key), value) for key, value in (header.get("config") or {}).items())
    out["config"] = config
    if "adapter_defaults" in header:
        out["adapterDefaults"] = {camel_key(key): value for key, value in header["adapter_defaults"].items()}
    return out


def _reason_to_dshkit(reason: Mapping[str, Any]) -> Any:
    kind = reason.get("kind")
    if kind == "max-tokens":
        return {key: ("max_tokens" if key == "kind" else reason[key]) for key in reason}
    cause = reason.get("reason")
    if kind == "aborted" and isinstance(cause, Mapping) and set(cause) == {"kind"} and "cause" not in reason:
        out = {key: reason[key] for key in reason if key != "reason"}
        out["cause"] = cause["kind"]
        return out
    return reason


def _reason_to_original(reason: Mapping[str, Any]) -> Any:
    kind = reason.get("kind")
    if kind == "max_tokens":
        return {**reason, "kind": "max-tokens"}
    if kind == "aborted" and isinstance(reason.get("cause"), str) and "reason" not in reason:
        out = {key: value for key, value in reason.items() if key != "cause"}
        out["reason"] = {"kind": reason["cause"]}
        return out
    return reason


# dshkit's one fact beside an answer that the original's `assistant/message` does not carry (it
# ignores it), written in the original's camelCase like every other key.
FINISH_REASON = {"finishReason": "finish_reason"}
_FINISH_REASON_BACK = {value: key for key, value in FINISH_REASON.items()}


def _message_event_to_dshkit(data: Any) -> Any:
    # One plain dict frozen at once: `freeze` keeps the already frozen values as they are.
    out = {FINISH_REASON.get(key, key): data[key] for key in data}
    out["message"] = message_to_dshkit(data["message"])
    usage = out.get("usage")
    if usage is not None and _is_mapping(usage):
        out["usage"] = _rename(usage, _USAGE)
    return freeze(out)


def _tool_call_to_dshkit(data: Any) -> Any:
    return freeze(_rename(data, _CALL_ID))


def _turn_end_to_dshkit(data: Any) -> Any:
    reason = data.get("reason")
    if reason is None or not _is_mapping(reason):
        return freeze(data)
    presented = _reason_to_dshkit(reason)
    if presented is reason:  # completed, error, ...: the same in both vocabularies
        return freeze(data)
    out = {key: data[key] for key in data}
    out["reason"] = presented
    return freeze(out)


def _header_event_to_dshkit(data: Any) -> Any:
    header = data.get("header")
    if header is None or not _is_mapping(header):
        return freeze(data)
    return freeze({**data, "header": _header_to_dshkit(header)})


def _inbox_to_dshkit(data: Any) -> Any:
    out = _rename(data, {"removedCount": "removed_count"})
    out["target"] = _TARGETS.get(data.get("target"), data.get("target"))
    if "inserted" in data:
        out["inserted"] = tuple(message_to_dshkit(item) for item in data["inserted"])
    return freeze(out)


# approval/*: the original's `toolName`, `callId` and kebab-case outcomes (`allowed-once`) read as
# dshkit's `tool`, `call_id`, `allowed_once`; a record without the fields dshkit reads is presented
# marked ignorable, as the original's other types are.
_APPROVAL_KEYS = {"toolName": "tool", "callId": "call_id"}
_APPROVAL_KEYS_BACK = {value: key for key, value in _APPROVAL_KEYS.items()}
_OUTCOMES = {"allowed-once": "allowed_once"}
_OUTCOMES_BACK = {value: key for key, value in _OUTCOMES.items()}
_APPROVAL_NEEDS = {"approval/asked": ("id", "toolName"), "approval/decided": ("id", "outcome"), "approval/policy": ("policy",)}


def _approval_to_dshkit(event_type: str, data: Any) -> Any:
    if not all(isinstance(data.get(key), str) for key in _APPROVAL_NEEDS[event_type]) or (
        _OUTCOMES.get(data.get("outcome"), data.get("outcome")) not in APPROVAL_OUTCOMES | {None}
        or data.get("policy", "ask") not in APPROVAL_POLICIES
    ):
        return data | {"ignorable": True} if type(data) is FrozenDict else freeze({**data, "ignorable": True})
    out = _rename(data, _APPROVAL_KEYS)
    if "outcome" in out:
        out["outcome"] = _OUTCOMES.get(out["outcome"], out["outcome"])
    return freeze(out)


def _approval_to_original(data: Mapping[str, Any]) -> dict[str, Any]:
    if data.get("ignorable") is True:
        return {key: value for key, value in data.items() if key != "ignorable"}
    out = _rename(data, _APPROVAL_KEYS_BACK)
    if "outcome" in out:
        out["outcome"] = _OUTCOMES_BACK.get(out["outcome"], out["outcome"])
    return out


def _is_mapping(value: object) -> bool:
    return type(value) is FrozenDict or isinstance(value, Mapping)


def _compaction_to_dshkit(data: Mapping[str, Any]) -> Any:
    out = {snake_key(key): data[key] for key in data}
    if _is_mapping(out.get("usage")):
        out["usage"] = _rename(out["usage"], _USAGE)
    return freeze(out)


def _compaction_to_original(data: Mapping[str, Any]) -> dict[str, Any]:
    out = {camel_key(key): data[key] for key in data}
    if isinstance(out.get("usage"), Mapping):
        out["usage"] = _rename(out["usage"], _USAGE_BACK)
    return out


_COMPACTION_TYPES = ("compaction/start", "compaction/summary", "compaction/prune", "compaction/end")

_TO_DSHKIT: dict[str, Callable[[Any], Any]] = {
    **{event_type: _compaction_to_dshkit for event_type in _COMPACTION_TYPES},
    "assistant/message": _message_event_to_dshkit,
    "tool/result": _message_event_to_dshkit,
    "tool/call": _tool_call_to_dshkit,
    "turn/end": _turn_end_to_dshkit,
    "request/header": _header_event_to_dshkit,
    "agent/inbox/spliced": _inbox_to_dshkit,
    "approval/asked": partial(_approval_to_dshkit, "approval/asked"),
    "approval/decided": partial(_approval_to_dshkit, "approval/decided"),
    "approval/policy": partial(_approval_to_dshkit, "approval/policy"),
}
IGNORABLE_TYPES = ORIGINAL_EVENT_TYPES - DSHKIT_MAPPED_TYPES
VERBATIM_TYPES = DSHKIT_MAPPED_TYPES - set(_TO_DSHKIT) - {"user/message"}
"""Types whose data reads the same in both vocabularies (boundaries, chunks, compaction records)."""


def data_to_dshkit(event_type: str, data: Any) -> Any:
    """An original event's data in dshkit's vocabulary (frozen)."""
    if event_type == "user/message":
        return message_to_dshkit(data)
    if not _is_mapping(data):
        return freeze(data)
    convert = _TO_DSHKIT.get(event_type)
    if convert is not None:
        return convert(data)
    if event_type in IGNORABLE_TYPES:
        return data | {"ignorable": True} if type(data) is FrozenDict else freeze({**data, "ignorable": True})
    return data if type(data) is FrozenDict else freeze(data)


def data_to_original(event_type: str, data: Any) -> Any:
    """A dshkit event's data in the original's vocabulary (plain JSON values)."""
    if event_type == "user/message":
        return message_to_original(data)
    if not isinstance(data, Mapping):
        return data
    if event_type == "assistant/message" or event_type == "tool/result":
        out: dict[str, Any] = _rename(data, _FINISH_REASON_BACK)
        out["message"] = message_to_original(data["message"])
        if isinstance(data.get("usage"), Mapping):
            out["usage"] = _rename(data["usage"], _USAGE_BACK)
        return out
    if event_type == "tool/call":
        return _rename(data, {"call_id": "callId"})
    if event_type == "turn/end" and isinstance(data.get("reason"), Mapping):
        return {**data, "reason": _reason_to_original(data["reason"])}
    if event_type == "request/header" and isinstance(data.get("header"), Mapping):
        return {**data, "header": _header_to_original(data["header"])}
    if event_type in _COMPACTION_TYPES:
        return _compaction_to_original(data)
    if event_type == "agent/inbox/spliced":
        out = _rename(data, {"removed_count": "removedCount"})
        out["target"] = _TARGETS_BACK.get(data.get("target"), data.get("target"))  # type: ignore[arg-type]
        if "inserted" in data:
            out["inserted"] = [message_to_original(item) for item in data["inserted"]]
        return out
    if event_type in _APPROVAL_NEEDS:
        return _approval_to_original(data)
    if event_type in ORIGINAL_EVENT_TYPES and event_type not in DSHKIT_MAPPED_TYPES:
        return {key: value for key, value in data.items() if key != "ignorable"}
    return data
