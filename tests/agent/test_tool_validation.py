"""Argument validation against each tool's JSON schema, before its body runs, and the retry budget."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.agent.validation import ArgumentValidator, SchemaError
from dshkit.models import ScriptedModel

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1},
        "mode": {"enum": ["read", "write"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["path", "mode"],
    "additionalProperties": False,
}


def drive(agent: Agent, message: Any) -> None:
    async def main() -> None:
        agent.followup(message)
        await agent.when_idle()

    asyncio.run(main())


def results(session: Any) -> list[Any]:
    return [e for e in session.events if e.type == "tool/result"]


def text(event: Any) -> str:
    return event.data["message"].content[0]["content"][0]["text"]


def test_invalid_arguments_do_not_run_the_body_and_the_result_names_each_path_and_value(kit: Any) -> None:
    ran: list[Any] = []
    model = ScriptedModel([
        kit.calls_response(("c1", "files", '{"path": "", "limit": 0, "mode": "delete", "tags": ["a", 3], "x": 1}')),
        "sorry",
    ])
    agent = Agent(model, tools=[Tool("files", "Files.", SCHEMA, lambda a, c: ran.append(a) or "ran")])
    drive(agent, kit.user("go"))
    assert ran == []
    (result,) = results(agent.session)
    assert result.data["error"] == {"name": "InvalidArguments", "code": "invalid_arguments"}
    assert result.data["message"].content[0]["is_error"] is True
    body = text(result)
    assert body.startswith("Invalid arguments for files: the tool did not run.")
    for path, received in [("/path", '""'), ("/limit", "0"), ("/mode", '"delete"'), ("/tags/1", "3"), ("/:", '"x"')]:
        assert path in body and received in body, (path, body)
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]  # within the budget: the model answers


def test_valid_arguments_run_the_body_with_the_parsed_object(kit: Any) -> None:
    seen: list[Any] = []
    model = ScriptedModel([kit.calls_response(("c1", "files", '{"path": "a.txt", "mode": "read"}')), "ok"])
    agent = Agent(model, tools=[Tool("files", "Files.", SCHEMA, lambda a, c: seen.append(a) or "done")])
    drive(agent, kit.user("go"))
    assert seen == [{"path": "a.txt", "mode": "read"}]
    assert text(results(agent.session)[0]) == "done"


def test_arguments_that_are_not_json_keep_the_error_they_had(kit: Any) -> None:
    model = ScriptedModel([kit.calls_response(("c1", "files", '{"path": ')), "ok"])
    agent = Agent(model, tools=[Tool("files", "Files.", SCHEMA, lambda a, c: "ran")])
    drive(agent, kit.user("go"))
    (result,) = results(agent.session)
    assert result.data["error"]["code"] == "invalid_arguments"
    assert text(result).startswith("Invalid arguments for files: not JSON")


def test_the_retry_budget_ends_the_turn_with_a_clear_code_once_spent(kit: Any) -> None:
    bad = kit.calls_response(("c1", "files", '{"mode": "read"}'))
    model = ScriptedModel([bad, kit.calls_response(("c2", "files", "{}")), kit.calls_response(("c3", "files", "{}")), "never"])
    agent = Agent(model, tools=[Tool("files", "Files.", SCHEMA, lambda a, c: "ran", retries=1)])
    drive(agent, kit.user("go"))
    assert len(model.requests) == 2  # one retry allowed: the second invalid call ends the turn
    assert len(results(agent.session)) == 2  # every call still has its result
    (end,) = kit.turn_ends(agent.session)
    assert end["kind"] == "error"
    assert end["error"]["code"] == "tool_retries_exhausted"
    assert "'files'" in end["error"]["message"] and "retries=1" in end["error"]["message"]


def test_the_budget_counts_per_turn(kit: Any) -> None:
    bad = kit.calls_response(("c1", "files", "{}"))
    model = ScriptedModel([bad, "first", bad, "second"])
    agent = Agent(model, tools=[Tool("files", "Files.", SCHEMA, lambda a, c: "ran", retries=1)])
    drive(agent, kit.user("one"))
    drive(agent, kit.user("two"))
    assert [end["kind"] for end in kit.turn_ends(agent.session)] == ["completed", "completed"]


def test_a_schema_that_is_not_a_schema_gives_an_error_result_naming_the_tool(kit: Any) -> None:
    model = ScriptedModel([kit.calls_response(("c1", "odd", "{}")), "ok"])
    agent = Agent(model, tools=[Tool("odd", "Odd.", {"type": "objekt"}, lambda a, c: "ran")])
    drive(agent, kit.user("go"))
    (result,) = results(agent.session)
    assert result.data["error"]["code"] == "invalid_schema"
    assert "Tool 'odd' parameters: not a valid JSON schema" in text(result)
    with pytest.raises(SchemaError, match="Tool 'odd'"):
        ArgumentValidator("odd", {"type": "objekt"})


@pytest.mark.parametrize("retries", [-1, 1.5, True])
def test_a_bad_retry_budget_is_refused(retries: Any) -> None:
    with pytest.raises(ValueError, match="retries"):
        Tool("t", "t", {"type": "object"}, lambda a, c: None, retries=retries)
