"""From a `ModelRequest` to the JSON body of a streaming OpenAI Responses call.

Stateless by design: ``store: false`` and no ``previous_response_id``, so the log stays the
authority and every request carries the whole conversation; encrypted reasoning is requested
(``include: ["reasoning.encrypted_content"]``) so it can go back. A pure function of the request
(same request, same bytes). Mapping (see ``docs/models.md``):

- the request's system prompt is ``instructions`` (a list of text blocks: a leading ``system``
  message item); logged ``system`` messages are ``system`` message items in place.
- user ``text`` / ``image`` / ``file`` blocks are ``input_text`` / ``input_image`` / ``input_file``
  parts (an attachment's bytes read from the request's attachments, as a data URL) of a ``message``
  item; each ``tool_result`` block a ``function_call_output`` item (text as a string, with images
  a list of parts), before the rest of its message.
- an assistant message whose ``source.replay_state`` (format: `dshkit.models.responses.replay`;
  written by `ResponsesStreamTranslator`, or on import by `dshkit.interop.openai_responses`)
  goes back item for item with the ids the API gave: ``reasoning`` items with their summaries and
  ``encrypted_content``, ``message`` items with their parts, ``function_call`` items. Without that
  state, text is an assistant message, tool calls ``function_call`` items, reasoning is dropped
  (the API cannot take reasoning it did not encrypt).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dshkit.llm import thaw
from dshkit.models.projection_parts import (
    UnsupportedContentError,
    apply_call_settings,
    block_text,
    file_data_url,
    file_name,
    image_url,
    replay_layout,
    system_block_texts,
    tool_call_fields,
    tool_fields,
    tool_result_fields,
)
from dshkit.models.settings import SettingNames, api_settings, merged_settings, output_schema

if TYPE_CHECKING:
    from dshkit.llm import Message
    from dshkit.session import ModelRequest
    from dshkit.session.attachments import Attachments

__all__ = [
    "REPLAY_API",
    "RESERVED_BODY_KEYS",
    "SETTING_NAMES",
    "replayed_items",
    "responses_body",
    "responses_input",
    "responses_text_format",
    "responses_tools",
]

REPLAY_API = "openai-responses"
RESERVED_BODY_KEYS = frozenset(("model", "input", "tools", "stream", "instructions", "store", "previous_response_id"))

SETTING_NAMES: SettingNames = {
    "max_tokens": "max_output_tokens",
    "stop": None,
    "seed": None,
    "presence_penalty": None,
    "frequency_penalty": None,
}
"""The common call settings under the Responses API's names (``None``: it has none); the others keep theirs."""


def responses_body(
    request: ModelRequest, *, model: str, defaults: Mapping[str, Any] | None = None, native_output: bool = True
) -> dict[str, Any]:
    """The Responses API request body for `request` (streaming, stateless); `defaults` are the
    model's call settings under the request's (`SETTING_NAMES` maps both); a requested
    structured output becomes ``text.format``."""
    body: dict[str, Any] = {"model": model}
    system = request.system
    items: list[dict[str, Any]] = []
    if isinstance(system, str):
        if system:
            body["instructions"] = system
    elif system is not None:
        items.append({"type": "message", "role": "system", "content": _system_parts(system)})
    items.extend(responses_input(request.messages, attachments=getattr(request, "attachments", None)))
    body["input"] = items
    tools = responses_tools(request.tools)
    if tools:
        body["tools"] = tools
    body["store"] = False
    body["include"] = ["reasoning.encrypted_content"]
    settings = merged_settings(defaults, request.config)
    apply_call_settings(body, api_settings(settings, SETTING_NAMES, "Responses API"), RESERVED_BODY_KEYS)
    spec = output_schema(settings, native=native_output)
    if spec is not None:
        text = body.get("text")
        if text is not None and (not isinstance(text, Mapping) or "format" in text):
            raise ValueError("request config['text']: cannot set 'format' beside config['output_schema'], which sets it")
        body["text"] = {**(text or {}), "format": responses_text_format(spec)}
    body["stream"] = True
    return body


def responses_text_format(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A checked output schema (`dshkit.models.settings.output_schema`) as ``text.format``."""
    text_format: dict[str, Any] = {"type": "json_schema", "name": spec["name"], "schema": spec["schema"], "strict": spec["strict"]}
    if spec["description"]:
        text_format["description"] = spec["description"]
    return text_format


def responses_tools(tools: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Tool specs as Responses ``function`` tools (flat: ``name``, ``description``, ``parameters``)."""
    projected: list[dict[str, Any]] = []
    for position, tool in enumerate(tools or ()):
        spec = {"type": "function", **tool_fields(tool, position)}
        if "strict" in tool:
            spec["strict"] = tool["strict"]
        projected.append(spec)
    return projected


def responses_input(messages: Iterable[Message], *, attachments: Attachments | None = None) -> list[dict[str, Any]]:
    """The ``input`` items for the logged messages, in order (attachment blocks inlined from `attachments`)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.role
        if role == "user":
            items.extend(_user_items(message, attachments))
        elif role == "assistant":
            items.extend(_assistant_items(message))
        elif role == "system":
            parts = [{"type": "input_text", "text": block_text(message, b, i)} for i, b in enumerate(message.content)]
            items.append({"type": "message", "role": "system", "content": parts})
        else:
            raise UnsupportedContentError(f"message {message.id}: unknown role {role!r}")
    return items


def _system_parts(system: object) -> list[dict[str, Any]]:
    return [{"type": "input_text", "text": text} for text in system_block_texts(system)]


def _user_items(message: Message, attachments: Attachments | None) -> list[dict[str, Any]]:
    outputs: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "input_text", "text": block_text(message, block, index)})
        elif kind == "image":
            parts.append(_image(message, block, f"content[{index}]", attachments))
        elif kind == "file":
            parts.append(_file(message, block, f"content[{index}]", attachments))
        elif kind == "tool_result":
            outputs.append(_call_output(message, block, index, attachments))
        else:
            raise UnsupportedContentError(f"message {message.id} content[{index}]: {kind!r} blocks cannot be sent to the Responses API")
    if parts or not outputs:
        outputs.append({"type": "message", "role": "user", "content": parts})
    return outputs


def _call_output(message: Message, block: Mapping[str, Any], index: int, attachments: Attachments | None) -> dict[str, Any]:
    call_id, inner = tool_result_fields(message, block, index)
    parts: list[dict[str, Any]] = []
    for position, part in enumerate(inner):
        where = f"content[{index}].content[{position}]"
        if part.get("type") == "text":
            parts.append({"type": "input_text", "text": block_text(message, part, index)})
        elif part.get("type") == "image":
            parts.append(_image(message, part, where, attachments))
        else:
            raise UnsupportedContentError(f"message {message.id} {where}: {part.get('type')!r} blocks cannot be sent in a tool result")
    output: str | list[dict[str, Any]]
    if all(part["type"] == "input_text" for part in parts):
        output = "".join(part["text"] for part in parts)
    else:
        output = parts
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    replayed = replayed_items(message)
    if replayed is not None:
        return replayed
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        kind = block.get("type")
        if kind == "text":
            texts.append(block_text(message, block, index))
        elif kind == "tool_call":
            calls.append(_function_call(message, block, index, None))
        elif kind != "reasoning":
            raise UnsupportedContentError(
                f"message {message.id} content[{index}]: {kind!r} blocks cannot be sent in an assistant message"
            )
    text = "".join(texts)
    items: list[dict[str, Any]] = [{"type": "message", "role": "assistant", "content": text}] if text else []
    return items + calls


def replayed_items(message: Message) -> list[dict[str, Any]] | None:
    """The output items as the API sent them, or ``None`` when the message has no Responses replay
    state or it does not describe exactly this content (so encrypted reasoning is never sent
    beside other text). The ``extra`` keys of an entry or part are written back into it."""
    layout = replay_layout(message, REPLAY_API, "items")
    if layout is None:
        return None
    reasoning = _Cursor("".join(b.get("text", "") for b in message.content if b.get("type") == "reasoning"))
    text = _Cursor("".join(b.get("text", "") for b in message.content if b.get("type") == "text"))
    calls = {b.get("id"): (i, b) for i, b in enumerate(message.content) if b.get("type") == "tool_call"}
    used: set[object] = set()
    items: list[dict[str, Any]] = []
    for entry in layout:
        kind = entry.get("type") if isinstance(entry, Mapping) else None
        if kind == "reasoning":
            item: dict[str, Any] = {"type": "reasoning", "id": entry.get("id")}
            content = [reasoning.take(n) for n in entry.get("content", ())]
            item["summary"] = [{"type": "summary_text", "text": reasoning.take(n)} for n in entry.get("summary", ())]
            if entry.get("content"):
                item["content"] = [{"type": "reasoning_text", "text": piece} for piece in content]
            if entry.get("encrypted_content") is not None:
                item["encrypted_content"] = entry["encrypted_content"]
            items.append(item)
        elif kind == "message":
            parts: list[dict[str, Any]] = []
            for part in entry.get("parts", ()):
                piece = text.take(part.get("length") if isinstance(part, Mapping) else None)
                if isinstance(part, Mapping) and part.get("type") == "refusal":
                    parts.append(_with_extra({"type": "refusal", "refusal": piece}, part))
                else:
                    parts.append(_with_extra({"type": "output_text", "text": piece, "annotations": []}, part))
            items.append({"type": "message", "id": entry.get("id"), "role": "assistant", "status": "completed", "content": parts})
        elif kind == "function_call":
            found = calls.get(entry.get("call_id"))
            if found is None or entry.get("call_id") in used:
                return None
            used.add(entry.get("call_id"))
            items.append(_function_call(message, found[1], found[0], entry.get("id")))
        else:
            return None
        items[-1] = _with_extra(items[-1], entry)
    if reasoning.bad or text.bad or not reasoning.at_end or not text.at_end or len(used) != len(calls):
        return None
    return items


def _with_extra(built: dict[str, Any], entry: object) -> dict[str, Any]:
    extra = entry.get("extra") if isinstance(entry, Mapping) else None
    return {**built, **thaw(extra)} if isinstance(extra, Mapping) else built


class _Cursor:
    """Hands out consecutive pieces of one text by length; `bad` once a length did not fit."""

    __slots__ = ("at", "bad", "text")

    def __init__(self, text: str) -> None:
        self.text, self.at, self.bad = text, 0, False

    def take(self, length: object) -> str:
        if isinstance(length, bool) or not isinstance(length, int) or length < 0 or self.at + length > len(self.text):
            self.bad = True
            return ""
        piece = self.text[self.at : self.at + length]
        self.at += length
        return piece

    @property
    def at_end(self) -> bool:
        return self.at == len(self.text)


def _function_call(message: Message, block: Mapping[str, Any], index: int, item_id: object) -> dict[str, Any]:
    call_id, name, arguments = tool_call_fields(message, block, index)
    item: dict[str, Any] = {"type": "function_call"}
    if isinstance(item_id, str):
        item["id"] = item_id
    item.update({"call_id": call_id, "name": name, "arguments": arguments})
    return item


def _image(message: Message, block: Mapping[str, Any], where: str, attachments: Attachments | None) -> dict[str, Any]:
    url = image_url(message, block, where, attachments)
    detail = block.get("detail")
    return {"type": "input_image", "image_url": url, "detail": detail if isinstance(detail, str) else "auto"}


def _file(message: Message, block: Mapping[str, Any], where: str, attachments: Attachments | None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "input_file", "file_data": file_data_url(message, block, where, attachments)}
    name = file_name(block)
    if name is not None:
        part["filename"] = name
    return part
