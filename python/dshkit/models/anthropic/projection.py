"""From a `ModelRequest` to the JSON body of a streaming Anthropic Messages call.

A pure function of the request, like `dshkit.models.chat.projection`: the same request gives
byte-identical bytes (`encode_body` is format-neutral). Mapping (see ``docs/models.md``):

- the request's system prompt, then any logged ``system`` messages (in log order), become the
  top-level ``system`` (the Messages API has no system turn inside the conversation).
- user ``text`` / ``image`` / ``file`` blocks become ``text`` / ``image`` / ``document`` blocks (an
  attachment's bytes read from the request's attachments, base64); each ``tool_result`` block
  a ``tool_result`` block (first in its user turn, as the API requires) with ``is_error`` kept.
- consecutive messages of one role are one turn (parallel tool results answer one assistant turn).
- an assistant message whose ``source.replay_state`` (format: `dshkit.models.anthropic.replay`;
  written by `AnthropicStreamTranslator`, or on import by `dshkit.interop.anthropic`) goes back
  block for block as it came: ``thinking`` blocks with their signatures,
  ``redacted_thinking`` with its data, a ``compaction`` block whole, text and ``tool_use`` in
  their order. Without that state (another provider's message, an interrupted prefix, an edited
  message) text and tool calls are sent and reasoning is dropped: Anthropic refuses thinking
  without a valid signature.
- tool ``arguments`` (the raw JSON text) become the ``input`` object.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dshkit.llm import thaw
from dshkit.models.projection_parts import (
    UnsupportedContentError,
    apply_call_settings,
    block_text,
    file_name,
    inline_data,
    replay_layout,
    system_block_texts,
    tool_call_fields,
    tool_fields,
    tool_result_fields,
)
from dshkit.models.settings import SettingNames, api_settings, as_list, merged_settings, output_schema

if TYPE_CHECKING:
    from dshkit.llm import Message
    from dshkit.session import ModelRequest
    from dshkit.session.attachments import Attachments

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "REPLAY_API",
    "RESERVED_BODY_KEYS",
    "SETTING_NAMES",
    "anthropic_body",
    "anthropic_messages",
    "anthropic_tools",
    "output_tool",
    "replayed_blocks",
]

REPLAY_API = "anthropic-messages"
"""The ``api`` of the replay state this projection reads back."""

RESERVED_BODY_KEYS = frozenset(("model", "messages", "tools", "stream", "system"))

DEFAULT_MAX_TOKENS = 8192
"""``max_tokens`` when neither the model's settings nor the request's set it (the API requires one)."""

SETTING_NAMES: SettingNames = {
    "stop": ("stop_sequences", as_list),
    "seed": None,
    "presence_penalty": None,
    "frequency_penalty": None,
    "parallel_tool_calls": None,
}
"""The common call settings under the Messages API's names (``None``: it has none); the others keep theirs."""


def anthropic_body(
    request: ModelRequest,
    *,
    model: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    defaults: Mapping[str, Any] | None = None,
    native_output: bool = True,
) -> dict[str, Any]:
    """The Messages API request body for `request` (streaming). `defaults` are the model's call
    settings under the request's (`SETTING_NAMES` maps both); ``max_tokens`` is `max_tokens`
    unless they set it. A requested structured output becomes a forced tool (`output_tool`)."""
    merged = merged_settings(defaults, request.config)
    settings = api_settings(merged, SETTING_NAMES, "Anthropic Messages API")
    spec = output_schema(merged, native=native_output)
    system, messages = anthropic_messages(request.messages, system=request.system, attachments=getattr(request, "attachments", None))
    body: dict[str, Any] = {"model": model, "max_tokens": settings.pop("max_tokens", max_tokens)}
    if system:
        body["system"] = system
    body["messages"] = messages
    tools = anthropic_tools(request.tools)
    if spec is not None:
        if any(tool["name"] == spec["name"] for tool in tools):
            raise ValueError(f"request config['output_schema']: its name {spec['name']!r} is also the name of a tool")
        if "tool_choice" in settings:
            raise ValueError("request config['tool_choice']: cannot be set beside config['output_schema'], which sets it")
        forced = {"type": "tool", "name": spec["name"]} if not tools else {"type": "any"}
        tools.append(output_tool(spec))
    if tools:
        body["tools"] = tools
    apply_call_settings(body, settings, RESERVED_BODY_KEYS)
    if spec is not None:
        body["tool_choice"] = forced
    body["stream"] = True
    return body


def output_tool(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A checked output schema (`dshkit.models.settings.output_schema`) as the tool the model must call."""
    tool: dict[str, Any] = {"name": spec["name"]}
    if spec["description"]:
        tool["description"] = spec["description"]
    tool["input_schema"] = spec["schema"]
    return tool


def anthropic_tools(tools: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Tool specs as Messages API tools (``name``, ``description``, ``input_schema``)."""
    return [tool_fields(tool, position, schema_key="input_schema") for position, tool in enumerate(tools or ())]


def anthropic_messages(
    messages: Iterable[Message],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    attachments: Attachments | None = None,
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """The ``(system, messages)`` pair: the system prompt and the alternating turns (attachment
    blocks inlined from `attachments`)."""
    system_texts = _system_texts(system)
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.role
        if role == "system":
            system_texts.extend(block_text(message, block, index) for index, block in enumerate(message.content))
            continue
        if role == "user":
            blocks = _user_blocks(message, attachments)
        elif role == "assistant":
            blocks = _assistant_blocks(message)
        else:
            raise UnsupportedContentError(f"message {message.id}: unknown role {role!r}")
        if not blocks:
            continue  # e.g. an interrupted reasoning-only prefix: nothing Anthropic would accept
        if turns and turns[-1]["role"] == role:
            previous = turns[-1]["content"]
            if role == "user":
                # Tool results lead their turn; anything else follows them.
                results = [b for b in previous + blocks if b["type"] == "tool_result"]
                others = [b for b in previous + blocks if b["type"] != "tool_result"]
                turns[-1]["content"] = results + others
            else:
                previous.extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    if not system_texts:
        return None, turns
    if len(system_texts) == 1:
        return system_texts[0], turns
    return [{"type": "text", "text": text} for text in system_texts], turns


def _system_texts(system: object) -> list[str]:
    if system is None:
        return []
    if isinstance(system, str):
        return [system] if system else []
    return system_block_texts(system)


def _user_blocks(message: Message, attachments: Attachments | None) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        kind = block.get("type")
        if kind == "text":
            others.append({"type": "text", "text": block_text(message, block, index)})
        elif kind == "image":
            others.append(_image(message, block, f"content[{index}]", attachments))
        elif kind == "file":
            others.append(_document(message, block, f"content[{index}]", attachments))
        elif kind == "tool_result":
            results.append(_tool_result(message, block, index, attachments))
        else:
            raise UnsupportedContentError(f"message {message.id} content[{index}]: {kind!r} blocks cannot be sent to Anthropic")
    return results + others


def _tool_result(message: Message, block: Mapping[str, Any], index: int, attachments: Attachments | None) -> dict[str, Any]:
    call_id, inner = tool_result_fields(message, block, index)
    parts: list[dict[str, Any]] = []
    for position, part in enumerate(inner):
        where = f"content[{index}].content[{position}]"
        if part.get("type") == "text":
            parts.append({"type": "text", "text": block_text(message, part, index)})
        elif part.get("type") == "image":
            parts.append(_image(message, part, where, attachments))
        else:
            raise UnsupportedContentError(
                f"message {message.id} {where}: {part.get('type')!r} blocks cannot be sent in a tool result"
            )
    projected: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": parts}
    if block.get("is_error"):
        projected["is_error"] = True
    return projected


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    replayed = replayed_blocks(message)
    if replayed is not None:
        return replayed
    blocks: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        kind = block.get("type")
        if kind == "text":
            text = block_text(message, block, index)
            if text:
                blocks.append({"type": "text", "text": text})
        elif kind == "tool_call":
            blocks.append(_tool_use(message, block, index))
        elif kind != "reasoning":
            raise UnsupportedContentError(
                f"message {message.id} content[{index}]: {kind!r} blocks cannot be sent in an assistant message"
            )
    return blocks


def replayed_blocks(message: Message) -> list[dict[str, Any]] | None:
    """The message's blocks as Anthropic sent them, or ``None`` when it has no Anthropic replay
    state or the state does not describe exactly this content (so a signature is never sent
    beside other text). An entry's ``extra`` keys are written back into its block."""
    layout = replay_layout(message, REPLAY_API, "blocks")
    if layout is None:
        return None
    reasoning = "".join(b.get("text", "") for b in message.content if b.get("type") == "reasoning")
    text = "".join(b.get("text", "") for b in message.content if b.get("type") == "text")
    calls = {b.get("id"): (i, b) for i, b in enumerate(message.content) if b.get("type") == "tool_call"}
    at_reasoning = at_text = 0
    used: set[object] = set()
    blocks: list[dict[str, Any]] = []
    for entry in layout:
        before = len(blocks)
        kind = entry.get("type") if isinstance(entry, Mapping) else None
        raw_length = entry.get("length") if isinstance(entry, Mapping) else None
        if kind in ("thinking", "text", "compaction") and (isinstance(raw_length, bool) or not isinstance(raw_length, int) or raw_length < 0):
            return None
        length = raw_length if isinstance(raw_length, int) else 0
        if kind == "thinking":
            signature = entry.get("signature")
            if not isinstance(signature, str):
                return None
            piece, at_reasoning = reasoning[at_reasoning : at_reasoning + length], at_reasoning + length
            blocks.append({"type": "thinking", "thinking": piece, "signature": signature})
        elif kind == "redacted_thinking":
            if not isinstance(entry.get("data"), str):
                return None
            blocks.append({"type": "redacted_thinking", "data": entry["data"]})
        elif kind == "text":
            piece, at_text = text[at_text : at_text + length], at_text + length
            if piece:
                blocks.append({"type": "text", "text": piece})
        elif kind == "tool_use":
            found = calls.get(entry.get("id"))
            if found is None or entry.get("id") in used:
                return None
            used.add(entry.get("id"))
            blocks.append(_tool_use(message, found[1], found[0]))
        elif kind == "compaction":
            block = entry.get("block")
            piece, at_reasoning = reasoning[at_reasoning : at_reasoning + length], at_reasoning + length
            if not isinstance(block, Mapping) or block.get("type") != "compaction" or (block.get("content") or "") != piece:
                return None
            blocks.append(thaw(block))
        else:
            return None
        extra = entry.get("extra")
        if isinstance(extra, Mapping) and len(blocks) > before:
            blocks[-1] = {**thaw(extra), **blocks[-1]}
    if at_reasoning != len(reasoning) or at_text != len(text) or len(used) != len(calls):
        return None
    return blocks


def _tool_use(message: Message, block: Mapping[str, Any], index: int) -> dict[str, Any]:
    call_id, name, arguments = tool_call_fields(message, block, index)
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise UnsupportedContentError(
            f"message {message.id} content[{index}]: tool_call 'arguments' is not a JSON object, which Anthropic's 'input' must be"
        )
    return {"type": "tool_use", "id": call_id, "name": name, "input": parsed}


def _image(message: Message, block: Mapping[str, Any], where: str, attachments: Attachments | None) -> dict[str, Any]:
    url = block.get("url")
    if isinstance(url, str):
        return {"type": "image", "source": {"type": "url", "url": url}}
    inline = inline_data(message, block, where, attachments)
    if inline is None:
        raise UnsupportedContentError(
            f"message {message.id} {where}: an image needs 'url', 'media_type' and base64 'data', or an 'attachment'"
        )
    return {"type": "image", "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}


def _document(message: Message, block: Mapping[str, Any], where: str, attachments: Attachments | None) -> dict[str, Any]:
    inline = inline_data(message, block, where, attachments)
    if inline is None:
        raise UnsupportedContentError(f"message {message.id} {where}: a file needs 'media_type' and base64 'data', or an 'attachment'")
    document: dict[str, Any] = {"type": "document", "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}
    name = file_name(block)
    if name is not None:
        document["title"] = name
    return document
