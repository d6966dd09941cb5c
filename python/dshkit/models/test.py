"""`TestModel`: calls every tool once with arguments valid for its schema, then answers validly.

For tests that want the agent's plumbing run without writing a script: the first request gets a
call of each tool the request offers (arguments made from each JSON schema by `example_of`), the
next one the structured output the request asks for (made from its schema the same way), or a
text answer when it asks for none.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from dshkit.models.protocol import CancelSignal, Chunk
from dshkit.models.replies import Call, calls_chunks, reply_chunks, output, text_chunks
from dshkit.models.scripted import OfflineModel, replay

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

_MAX_DEPTH = 8  # a recursive schema stops here (an optional field left out, an empty list)


class TestModel(OfflineModel):
    """A model exercising every tool once with schema-valid arguments, then answering (see the module doc)."""

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, *, text: str = "success (no tool calls)", provider: str = "test", model: str = "test") -> None:
        if not isinstance(text, str):
            raise TypeError(f"TestModel text: expected a str, got {type(text).__name__}")
        OfflineModel.__init__(self, "TestModel", provider, model, native_output=False)
        self.text = text

    def stream(self, request: ModelRequest, cancel: CancelSignal | None = None) -> AsyncIterator[Chunk]:
        """Call the tools not called yet in this conversation; else give the output or the text."""
        number = self._record(request)
        return replay(self._reply(request, number), cancel)

    def _reply(self, request: ModelRequest, number: int) -> list[Any]:
        entry = request.config.get("output_schema")
        output_name = entry["name"] if entry is not None else None
        called = {call["name"] for message in request.messages for call in message.tool_calls}
        waiting = [tool for tool in request.tools if tool["name"] != output_name and tool["name"] not in called]
        if waiting:
            return calls_chunks([Call(tool["name"], example_of(tool["parameters"])) for tool in waiting], number)
        if entry is not None:
            return reply_chunks(output(example_of(entry["schema"])), request, native=False, number=number)
        return text_chunks(self.text)


def example_of(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None, depth: int = 0) -> Any:
    """A JSON value valid for `schema` (the common keywords: types, properties, enums, refs, bounds)."""
    root = schema if root is None else root
    if "$ref" in schema:
        target: Any = root
        for part in str(schema["$ref"]).lstrip("#/").split("/"):
            target = target[part]
        return example_of(target, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for keyword in ("anyOf", "oneOf", "allOf"):
        if schema.get(keyword):
            options = [option for option in schema[keyword] if option.get("type") != "null"] or list(schema[keyword])
            return example_of(options[0], root, depth + 1)
    kind = schema.get("type", "object")
    if not isinstance(kind, str):
        kind = next((one for one in kind if one != "null"), "null")
    if kind == "object":
        required = schema.get("required") or ()
        properties = schema.get("properties") or {}
        return {
            name: example_of(sub, root, depth + 1)
            for name, sub in properties.items()
            if name in required or depth < _MAX_DEPTH // 2
        }
    if kind == "array":
        item = schema.get("items") or {}
        count = max(int(schema.get("minItems", 1)), 1) if depth < _MAX_DEPTH else int(schema.get("minItems", 0))
        return [example_of(item, root, depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0) + (1 if "exclusiveMinimum" in schema else 0))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        value = max(low, 0) if high is None or max(low, 0) <= high else low
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _example_string(schema)


def _example_string(schema: Mapping[str, Any]) -> str:
    formats = {"date": "2024-01-01", "date-time": "2024-01-01T00:00:00Z", "email": "a@example.com", "uri": "https://example.com"}
    text = formats.get(str(schema.get("format")), "a")
    minimum = int(schema.get("minLength", 0))
    return text + "a" * max(minimum - len(text), 0)


__all__ = ["TestModel", "example_of"]
