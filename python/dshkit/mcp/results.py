"""An MCP `tools/call` result as a dshkit tool answer: content blocks the model can read, the rest kept.

Tool results carry text and image blocks (DESIGN §2), which every model API can send back. An
MCP result may hold more: embedded resources, resource links, audio, structured content. What
a model can read goes into the content (a text resource as text, an image resource as an
image, a link as a line naming it); everything the server sent beyond plain text and images is
kept, as the SDK's JSON, in the result's `meta` (logged beside the result, never shown to the
model). Structured content is sent as JSON text only when the server gave no content blocks
(servers are asked to send its text form themselves, so it is not repeated).
"""

from __future__ import annotations

from typing import Any

from dshkit.agent.tools import ToolOutput
from dshkit.llm import to_json


def tool_output(result: Any, *, server: str, tool: str) -> ToolOutput:
    """The `ToolOutput` for an SDK `CallToolResult` of `tool` on `server` (`isError` -> an error result)."""
    blocks: list[dict[str, Any]] = []
    kept: list[Any] = []
    for item in result.content:
        kind = getattr(item, "type", None)
        if kind == "text":
            blocks.append({"type": "text", "text": item.text})
            continue
        if kind == "image":
            blocks.append({"type": "image", "media_type": item.mime_type, "data": item.data})
            continue
        kept.append(item.model_dump(mode="json", by_alias=True, exclude_none=True))
        blocks.append(_readable(kind, item))
    structured = getattr(result, "structured_content", None)
    if structured is not None and not blocks:
        blocks.append({"type": "text", "text": to_json(structured)})
    meta: dict[str, Any] = {"mcp": {"server": server, "tool": tool}}
    if structured is not None:
        meta["mcp"]["structured_content"] = structured
    if kept:
        meta["mcp"]["content"] = kept
    return ToolOutput(blocks if blocks else "", is_error=bool(result.is_error), meta=meta)


def _readable(kind: str | None, item: Any) -> dict[str, Any]:
    """The block a model reads for content that is neither text nor an image."""
    if kind == "resource":
        resource = item.resource
        uri, mime = str(resource.uri), getattr(resource, "mime_type", None)
        text = getattr(resource, "text", None)
        if text is not None:
            return {"type": "text", "text": f"[resource {uri}]\n{text}"}
        blob = getattr(resource, "blob", "")
        if mime is not None and mime.startswith("image/"):
            return {"type": "image", "media_type": mime, "data": blob}
        return {"type": "text", "text": f"[resource {uri}: {mime or 'binary'}, {len(blob)} base64 characters, not shown]"}
    if kind == "resource_link":
        description = f": {item.description}" if getattr(item, "description", None) else ""
        return {"type": "text", "text": f"[resource link {item.name} {item.uri}{description}]"}
    if kind == "audio":
        return {"type": "text", "text": f"[audio {item.mime_type}, {len(item.data)} base64 characters, not shown]"}
    return {"type": "text", "text": f"[{kind} content, not shown]"}


__all__ = ["tool_output"]
