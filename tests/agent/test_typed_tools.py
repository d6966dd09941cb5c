"""Typed tools: `Tool.from_function` / `@tool` take name, docstring and schema from the function."""

from __future__ import annotations

import asyncio
import enum
from typing import Annotated, Any, Literal

import pydantic
import pytest

from dshkit.agent import Agent, Tool, ToolContext, tool
from dshkit.models import ScriptedModel


class Point(pydantic.BaseModel):
    x: int
    y: int


class Unit(enum.Enum):
    CM = "cm"
    INCH = "inch"


def measure(
    start: Point,
    end: Point,
    unit: Unit = Unit.CM,
    precision: Annotated[int, pydantic.Field(ge=0, le=6, description="digits after the point")] = 2,
    label: Literal["short", "long"] = "short",
) -> str:
    """Measure the distance between two points.

    Returns it as text.
    """
    distance = ((end.x - start.x) ** 2 + (end.y - start.y) ** 2) ** 0.5
    return f"{distance:.{precision}f} {unit.value} ({label})"


def drive(agent: Agent, message: Any) -> None:
    async def main() -> None:
        agent.followup(message)
        await agent.when_idle()

    asyncio.run(main())


def result_text(session: Any) -> str:
    (result,) = [e for e in session.events if e.type == "tool/result"]
    return result.data["message"].content[0]["content"][0]["text"]  # type: ignore[no-any-return]


def test_name_description_and_schema_come_from_the_function() -> None:
    built = Tool.from_function(measure)
    assert built.name == "measure"
    assert built.description == "Measure the distance between two points.\n\nReturns it as text."
    schema = built.parameters
    assert schema["type"] == "object"
    assert sorted(schema["required"]) == ["end", "start"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["precision"] == {"type": "integer", "minimum": 0, "maximum": 6, "default": 2, "description": "digits after the point"}
    assert list(props["label"]["enum"]) == ["short", "long"]
    assert "title" not in props["start"] and "$defs" in schema


def test_the_body_gets_the_arguments_as_the_hinted_types(kit: Any) -> None:
    arguments = '{"start": {"x": 0, "y": 0}, "end": {"x": 3, "y": 4}, "unit": "inch", "precision": 1}'
    model = ScriptedModel([kit.calls_response(("c1", "measure", arguments)), "5 inches"])
    agent = Agent(model, tools=[Tool.from_function(measure)])
    drive(agent, kit.user("how far?"))
    assert result_text(agent.session) == "5.0 inch (short)"


def test_the_schema_validates_before_the_body(kit: Any) -> None:
    model = ScriptedModel([kit.calls_response(("c1", "measure", '{"start": {"x": 0}, "end": {"x": 1, "y": 1}, "precision": 9}')), "ok"])
    agent = Agent(model, tools=[Tool.from_function(measure)])
    drive(agent, kit.user("how far?"))
    text = result_text(agent.session)
    assert "/start" in text and "/precision" in text and "9" in text


def test_the_decorator_async_bodies_context_and_options(kit: Any) -> None:
    seen: list[Any] = []

    @tool(timeout=5, approval="never", name="lookup")
    async def find(query: str, ctx: ToolContext, limit: int = 3) -> list[str]:
        """Look something up."""
        seen.append((query, limit, ctx.call_id))
        return [query] * limit

    assert isinstance(find, Tool)
    assert (find.name, find.timeout, find.approval, find.description) == ("lookup", 5.0, "never", "Look something up.")
    assert "ctx" not in find.parameters["properties"]

    @tool
    async def search(query: str, ctx: ToolContext, limit: int = 2) -> list[str]:
        """Search."""
        seen.append((query, limit, ctx.call_id))
        return [query] * limit

    model = ScriptedModel([kit.calls_response(("c1", "search", '{"query": "q"}')), "ok"])
    agent = Agent(model, tools=[search])
    drive(agent, kit.user("go"))
    assert seen == [("q", 2, "c1")]
    assert result_text(agent.session) == '["q","q"]'


def test_functions_that_cannot_be_described_are_refused() -> None:
    def untyped(a):  # type: ignore[no-untyped-def]
        return a

    def star(*names: str) -> None:
        return None

    with pytest.raises(TypeError, match="parameter 'a' has no type hint"):
        Tool.from_function(untyped)
    with pytest.raises(TypeError, match="passable by keyword"):
        Tool.from_function(star)
    with pytest.raises(ValueError, match="no usable name"):
        Tool.from_function(lambda x: x)
    with pytest.raises(TypeError, match="expected a function"):
        Tool.from_function(42)  # type: ignore[arg-type]
