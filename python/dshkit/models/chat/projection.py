"""From a `ModelRequest` to the JSON body of a streaming chat-completions call.

A pure function of the request: nothing is minted, nothing read from the clock or the
environment, so the same request always gives byte-identical bytes (`dshkit.models.projection_parts.encode_body`). Key
order is fixed by construction; the order of keys inside caller-provided JSON (tool schemas, call
settings) is kept as logged, because a schema's property order is part of what the model reads.

Mapping (see ``docs/models.md``):

- the request's system prompt first, as a ``system`` message; logged ``system`` messages in place.
- a content that is exactly one text block is a string; anything else is a list of parts
  (``{"type": "text"}``, ``{"type": "image_url"}``, ``{"type": "file"}``); images become data
  URLs or plain URLs, files data URLs; an attachment block's bytes are read from the request's
  attachments and inlined.
- ``reasoning`` blocks of an assistant message go back under `reasoning_field`
  (``reasoning_content``, as DeepSeek requires after tool calls; ``None`` drops them), an empty
  one beside tool calls when `empty_reasoning_with_tool_calls` (DeepSeek's thinking mode).
- ``tool_call`` blocks become ``tool_calls`` with the call ids and the raw argument text.
- each ``tool_result`` block becomes a ``role: "tool"`` message with its ``tool_call_id``; images a
  tool returned follow the run of tool messages as one user message (tool messages are text only).
- the request's tools become ``function`` tools; its call settings (``temperature``,
  ``max_tokens``, ...) are copied into the body, common names under this API's names; a
  requested structured output (``output_schema``) becomes ``response_format``.

A block that cannot be expressed raises `UnsupportedContentError` naming the message and block.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dshkit.models.projection_parts import (
    UnsupportedContentError,
    apply_call_settings,
    file_data_url,
    file_name,
    image_url,
    system_block_texts,
    tool_call_fields,
    tool_fields,
    tool_result_fields,
)

from dshkit.models.settings import COMMON_SETTINGS, SettingNames, api_settings, merged_settings, output_schema

if TYPE_CHECKING:
    from dshkit.llm import Message
    from dshkit.session import ModelRequest
    from dshkit.session.attachments import Attachments

__all__ = [
    "RESERVED_BODY_KEYS",
    "SETTING_NAMES",
    "chat_body",
    "chat_response_format",
    "chat_messages",
    "chat_tools",
]

RESERVED_BODY_KEYS = frozenset(("model", "messages", "tools", "stream"))
"""Body keys the projection owns: call settings may not set them."""

SETTING_NAMES: SettingNames = {name: name for name in COMMON_SETTINGS}
"""The common call settings under Chat Completions' names (the vocabulary follows this API)."""


def chat_body(
    request: ModelRequest,
    *,
    model: str,
    reasoning_field: str | None = "reasoning_content",
    include_usage: bool = True,
    empty_reasoning_with_tool_calls: bool = False,
    defaults: Mapping[str, Any] | None = None,
    native_output: bool = True,
) -> dict[str, Any]:
    """The chat-completions request body for `request` (streaming, usage requested).

    `empty_reasoning_with_tool_calls` puts an empty `reasoning_field` on assistant messages with
    tool calls but no reasoning (DeepSeek's thinking mode refuses them without the key).
    `defaults` are the model's call settings, under the request's (`SETTING_NAMES` maps both);
    a requested structured output becomes ``response_format`` (`chat_response_format`).
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(
            request.messages,
            system=request.system,
            reasoning_field=reasoning_field,
            empty_reasoning_with_tool_calls=empty_reasoning_with_tool_calls,
            attachments=getattr(request, "attachments", None),
        ),
    }
    tools = chat_tools(request.tools)
    if tools:
        body["tools"] = tools
    settings = merged_settings(defaults, request.config)
    apply_call_settings(body, api_settings(settings, SETTING_NAMES, "Chat Completions API"), RESERVED_BODY_KEYS)
    spec = output_schema(settings, native=native_output)
    if spec is not None:
        if "response_format" in body:
            raise ValueError("request config['response_format']: cannot be set beside config['output_schema'], which sets it")
        body["response_format"] = chat_response_format(spec)
    body["stream"] = True
    if include_usage and "stream_options" not in body:
        body["stream_options"] = {"include_usage": True}
    return body


def chat_response_format(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A checked output schema (`dshkit.models.settings.output_schema`) as ``response_format``."""
    json_schema: dict[str, Any] = {"name": spec["name"], "schema": spec["schema"], "strict": spec["strict"]}
    if spec["description"]:
        json_schema["description"] = spec["description"]
    return {"type": "json_schema", "json_schema": json_schema}


def chat_tools(tools: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Tool specs (``name``, ``description``, ``parameters``) as ``function`` tools."""
    projected: list[dict[str, Any]] = []
    for position, tool in enumerate(tools or ()):
        function = tool_fields(tool, position)
        if "strict" in tool:
            function["strict"] = tool["strict"]
        projected.append({"type": "function", "function": function})
    return projected


def chat_messages(
    messages: Iterable[Message],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    reasoning_field: str | None = "reasoning_content",
    empty_reasoning_with_tool_calls: bool = False,
    attachments: Attachments | None = None,
) -> list[dict[str, Any]]:
    """The ``messages`` array: the system prompt, then each message in order (attachment blocks
    inlined from `attachments`)."""
    projected: list[dict[str, Any]] = []
    if isinstance(system, str):
        if system:
            projected.append({"role": "system", "content": system})
    elif system is not None:
        projected.append({"role": "system", "content": _system_parts(system)})
    # Images returned by tools wait here until the run of tool messages ends: a user message
    # between the tool messages answering one assistant message is refused by providers.
    tool_images: list[dict[str, Any]] = []
    for message in messages:
        role = message.role
        if role == "user":
            _project_user(message, projected, tool_images, attachments)
            continue
        if tool_images:
            projected.append({"role": "user", "content": tool_images})
            tool_images = []
        if role == "assistant":
            projected.append(_project_assistant(message, reasoning_field, empty_reasoning_with_tool_calls))
        elif role == "system":
            projected.append({"role": "system", "content": _parts(message, message.content, images=False)})
        else:
            raise UnsupportedContentError(f"message {message.id}: unknown role {role!r}")
    if tool_images:
        projected.append({"role": "user", "content": tool_images})
    return projected


def _system_parts(system: object) -> str | list[dict[str, Any]]:
    """A system prompt given as text blocks (the header may hold blocks instead of a str)."""
    texts = system_block_texts(system)
    if len(texts) == 1:
        return texts[0]
    return [{"type": "text", "text": text} for text in texts]


def _project_user(
    message: Message, out: list[dict[str, Any]], tool_images: list[dict[str, Any]], attachments: Attachments | None
) -> None:
    others: list[Mapping[str, Any]] = []
    for index, block in enumerate(message.content):
        if block.get("type") != "tool_result":
            others.append(block)
            continue
        call_id, inner = tool_result_fields(message, block, index)
        texts = [part for part in inner if part.get("type") == "text"]
        images = [part for part in inner if part.get("type") == "image"]
        for position, part in enumerate(inner):
            if part.get("type") not in ("text", "image"):
                raise UnsupportedContentError(
                    f"message {message.id} content[{index}].content[{position}]: "
                    f"{part.get('type')!r} blocks cannot be sent in a tool result"
                )
        out.append({"role": "tool", "tool_call_id": call_id, "content": _parts(message, texts, images=False)})
        if images:
            tool_images.append({"type": "text", "text": f"Images returned by tool call {call_id}:"})
            tool_images.extend(_image_part(message, f"content[{index}]", image, attachments) for image in images)
    if not others and len(message.content) > 0:
        return
    if tool_images:
        out.append({"role": "user", "content": tool_images[:]})
        tool_images.clear()
    out.append({"role": "user", "content": _parts(message, others, images=True, attachments=attachments)})


def _project_assistant(
    message: Message, reasoning_field: str | None, empty_reasoning_with_tool_calls: bool = False
) -> dict[str, Any]:
    texts: list[Mapping[str, Any]] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        kind = block.get("type")
        if kind == "text":
            texts.append(block)
        elif kind == "reasoning":
            reasoning.append(block.get("text", ""))
        elif kind == "tool_call":
            call_id, name, arguments = tool_call_fields(message, block, index)
            calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
        else:
            raise UnsupportedContentError(
                f"message {message.id} content[{index}]: {kind!r} blocks cannot be sent in an assistant message"
            )
    projected: dict[str, Any] = {"role": "assistant"}
    # Providers want `null` content beside tool calls, a string otherwise.
    projected["content"] = _parts(message, texts, images=False) if texts or not calls else None
    if reasoning_field and (reasoning or (calls and empty_reasoning_with_tool_calls)):
        projected[reasoning_field] = "".join(reasoning)
    if calls:
        projected["tool_calls"] = calls
    return projected


def _parts(
    message: Message, blocks: Sequence[Mapping[str, Any]], *, images: bool, attachments: Attachments | None = None
) -> str | list[dict[str, Any]]:
    """One text block as a string; otherwise a list of text (and, where allowed, image and file) parts."""
    if not blocks:
        return ""
    if len(blocks) == 1 and blocks[0].get("type") == "text":
        return _text(message, blocks[0])
    parts: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": _text(message, block)})
        elif kind == "image" and images:
            parts.append(_image_part(message, f"content[{index}]", block, attachments))
        elif kind == "file" and images:
            parts.append(_file_part(message, f"content[{index}]", block, attachments))
        else:
            raise UnsupportedContentError(
                f"message {message.id} ({message.role}): {kind!r} blocks cannot be sent in this message"
            )
    return parts


def _text(message: Message, block: Mapping[str, Any]) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise UnsupportedContentError(f"message {message.id}: a text block without a str 'text'")
    return text


def _image_part(message: Message, where: str, block: Mapping[str, Any], attachments: Attachments | None) -> dict[str, Any]:
    image: dict[str, Any] = {"url": image_url(message, block, where, attachments)}
    detail = block.get("detail")
    if isinstance(detail, str):
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def _file_part(message: Message, where: str, block: Mapping[str, Any], attachments: Attachments | None) -> dict[str, Any]:
    file: dict[str, Any] = {"file_data": file_data_url(message, block, where, attachments)}
    name = file_name(block)
    if name is not None:
        file["filename"] = name
    return {"type": "file", "file": file}
