"""The checks and pieces every request projection shares (chat completions, Messages, Responses).

Each wire format shapes its body differently, but reads the same `ModelRequest` fields the same
way: a tool spec's name, description and schema; a tool call's id, name and argument text; a
text block's text; an image's URL or its bytes (inline, or read from the request's attachments); a system prompt given as text blocks; the call settings; an
assistant message's replay state. Reading them once here keeps the error messages (and what is
accepted) the same whichever provider a request goes to. `encode_body` turns any format's body
into its bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dshkit.llm import json_default
from dshkit.session.errors import AttachmentError

if TYPE_CHECKING:
    from dshkit.llm import Message
    from dshkit.session.attachments import Attachments

__all__ = [
    "UnsupportedContentError",
    "apply_call_settings",
    "block_text",
    "encode_body",
    "file_data_url",
    "file_name",
    "image_url",
    "inline_data",
    "replay_layout",
    "system_block_texts",
    "tool_call_fields",
    "tool_fields",
    "tool_result_fields",
]

class UnsupportedContentError(ValueError):
    """A content block (or message) that the provider's request format cannot carry."""


def tool_fields(tool: object, position: int, *, schema_key: str = "parameters") -> dict[str, Any]:
    """A checked tool spec as ``name``, ``description`` (when given) and its JSON schema under
    `schema_key` (an empty object schema when it has none), in that order."""
    where = f"request tools[{position}]"
    if not isinstance(tool, Mapping):
        raise TypeError(f"{where}: expected a mapping, got {type(tool).__name__}")
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: 'name' must be a non-empty str")
    fields: dict[str, Any] = {"name": name}
    if tool.get("description"):
        fields["description"] = tool["description"]
    parameters = tool.get("parameters")
    fields[schema_key] = parameters if parameters is not None else {"type": "object", "properties": {}}
    return fields


def apply_call_settings(body: dict[str, Any], config: Mapping[str, Any] | None, reserved: frozenset[str]) -> None:
    """Copy the request's call settings into `body`; a `reserved` key (one the projection sets)
    is refused."""
    for key, value in (config or {}).items():
        if key in reserved:
            raise ValueError(f"request config[{key!r}]: {key!r} is set by the model itself and cannot be a call setting")
        body[key] = value


def system_block_texts(system: object) -> list[str]:
    """The texts of a system prompt given as a list of text blocks (a str is not one)."""
    if isinstance(system, Sequence) and not isinstance(system, (str, bytes)):
        texts: list[str] = []
        for index, block in enumerate(system):
            if not isinstance(block, Mapping) or block.get("type") != "text" or not isinstance(block.get("text"), str):
                raise UnsupportedContentError(f"request system[{index}]: only text blocks can be a system prompt")
            texts.append(block["text"])
        return texts
    raise UnsupportedContentError(f"request system: expected a str or a list of text blocks, got {type(system).__name__}")


def tool_call_fields(message: Message, block: Mapping[str, Any], index: int) -> tuple[str, str, str]:
    """A ``tool_call`` block's checked ``(id, name, arguments)``; arguments are the raw JSON text."""
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("arguments", "")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise UnsupportedContentError(f"message {message.id} content[{index}]: tool_call needs a non-empty 'id' and 'name'")
    if not isinstance(arguments, str):
        raise UnsupportedContentError(f"message {message.id} content[{index}]: tool_call 'arguments' must be the raw JSON text (str)")
    return call_id, name, arguments


def tool_result_fields(message: Message, block: Mapping[str, Any], index: int) -> tuple[str, Sequence[Mapping[str, Any]]]:
    """A ``tool_result`` block's checked ``tool_call_id`` and its content blocks (a str is one text block)."""
    call_id = block.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise UnsupportedContentError(f"message {message.id} content[{index}]: tool_result without a 'tool_call_id'")
    inner = block.get("content", ())
    if isinstance(inner, str):
        inner = ({"type": "text", "text": inner},)
    return call_id, inner


def block_text(message: Message, block: Mapping[str, Any], index: int) -> str:
    """The ``text`` of a text block (content position `index`), checked to be a str."""
    text = block.get("text")
    if not isinstance(text, str):
        raise UnsupportedContentError(f"message {message.id} content[{index}]: a text block without a str 'text'")
    return text


def inline_data(
    message: Message, block: Mapping[str, Any], where: str, attachments: Attachments | None
) -> tuple[str, str] | None:
    """An image or file block's ``(media_type, base64 data)``: its own ``data``, or the verified
    bytes of its ``attachment`` read through `attachments`; `None` when it has neither.

    `AttachmentError` (naming the attachment, the message and the block) when the bytes are
    missing or altered, or when no `attachments` were given to read them from.
    """
    reference = block.get("attachment")
    if isinstance(reference, Mapping):
        referrer = f"message {message.id} {where}"
        if attachments is None:
            identity = str(reference.get("id"))
            raise AttachmentError(f"{referrer}: attachment {identity} cannot be read: the request carries no attachments", identity)
        return reference["media_type"], attachments.base64(reference, referrer=referrer)
    media_type, data = block.get("media_type"), block.get("data")
    if isinstance(media_type, str) and isinstance(data, str):
        return media_type, data
    return None


def image_url(message: Message, block: Mapping[str, Any], where: str, attachments: Attachments | None = None) -> str:
    """An image block's ``url``, or its bytes (inline or attached) as a data URL."""
    url = block.get("url")
    if isinstance(url, str):
        return url
    inline = inline_data(message, block, where, attachments)
    if inline is None:
        raise UnsupportedContentError(
            f"message {message.id} {where}: an image needs 'url', 'media_type' and base64 'data', or an 'attachment'"
        )
    return f"data:{inline[0]};base64,{inline[1]}"


def file_data_url(message: Message, block: Mapping[str, Any], where: str, attachments: Attachments | None) -> str:
    """A file block's bytes (inline or attached) as a data URL."""
    inline = inline_data(message, block, where, attachments)
    if inline is None:
        raise UnsupportedContentError(f"message {message.id} {where}: a file needs 'media_type' and base64 'data', or an 'attachment'")
    return f"data:{inline[0]};base64,{inline[1]}"


def file_name(block: Mapping[str, Any]) -> str | None:
    """A file block's display name (its own ``name``, or its attachment's)."""
    name = block.get("name")
    reference = block.get("attachment")
    if name is None and isinstance(reference, Mapping):
        name = reference.get("name")
    return name if isinstance(name, str) else None


def replay_layout(message: Message, api: str, key: str) -> Sequence[Any] | None:
    """The list under `key` of the message's ``source.replay_state`` when that state was written
    for `api`; ``None`` otherwise (no state, another provider's, or not a list)."""
    source = message.source
    state = source.get("replay_state") if isinstance(source, Mapping) else None
    if not isinstance(state, Mapping) or state.get("api") != api:
        return None
    layout = state.get(key)
    if not isinstance(layout, Sequence) or isinstance(layout, (str, bytes)):
        return None
    return layout


def encode_body(body: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON bytes of a body (frozen parts included), byte-identical for equal input."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=json_default)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate cannot be UTF-8: the escaped form is still valid JSON text.
        return json.dumps(
            body, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=json_default
        ).encode("ascii")
