"""Argument validation against each tool's JSON schema, before its body runs, and the retry budget."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.agent._tools import validation
from dshkit.agent._tools.validation import ArgumentValidator, SchemaError
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


BACKTRACKING = r"^(\w+\s?)+(?!x)$"  # catastrophic on "aaaa...!": the lookahead forces the backtracking engine


def pathological_keys(count: int) -> str:
    return json.dumps({f"{'a' * 18}{index:06d}!": 1 for index in range(count)})


def test_linear_patterns_are_checked_on_the_loop_and_backtracking_ones_are_marked() -> None:
    assert ArgumentValidator("t", {"type": "object", "properties": {"a": {"pattern": "^[a-z]+$"}}}).backtracks is False
    assert ArgumentValidator("t", {"type": "object", "patternProperties": {BACKTRACKING: {}}}).backtracks is True


def test_a_huge_invalid_argument_reports_its_first_error_without_building_them_all() -> None:
    validator = ArgumentValidator("t", {"type": "object", "properties": {"s": {"type": "array", "items": {"type": "integer"}}}})
    arguments = {"s": ["x"] * 1_000_000}
    problems = validator.problems(arguments, len(json.dumps(arguments)))
    assert problems[0] == '/s/0: "x" is not of type "integer" (got "x")'
    assert len(problems) == 2 and "only the first error is listed" in problems[1]
    small = {"s": ["x"] * 30}
    assert len(validator.problems(small, len(json.dumps(small)))) == 21  # 20 listed, then "(more errors left out)"


def test_a_backtracking_pattern_on_small_arguments_stops_at_its_step_budget(kit: Any) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": BACKTRACKING}}}
    model = ScriptedModel([kit.calls_response(("c1", "t", json.dumps({"s": "a" * 40 + "!"}))), "ok"])
    agent = Agent(model, tools=[Tool("t", "T.", schema, lambda a, c: "ran")])
    drive(agent, kit.user("go"))
    (result,) = results(agent.session)
    assert result.data["error"]["code"] == "invalid_arguments" and "backtracking" in text(result)


def run_watched(agent: Agent, kit: Any, *, cancel_when_checking: bool = False) -> list[str]:
    """Drive one turn while another task ticks every 10 ms, noting the last event type at each tick."""
    seen: list[str] = []

    async def main() -> None:
        done = asyncio.Event()

        async def tick() -> None:
            while not done.is_set():
                last = agent.session.events[-1].type
                seen.append(last)
                if cancel_when_checking and last == "tool/call" and seen.count("tool/call") == 20:
                    agent.cancel("user")
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        agent.followup(kit.user("go"))
        await agent.when_idle()
        done.set()
        await ticker

    asyncio.run(main())
    return seen


def test_a_backtracking_schema_on_large_arguments_is_checked_off_the_loop_within_its_budget(
    kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(validation, "VALIDATION_SECONDS", 1.0)
    schema = {"type": "object", "patternProperties": {BACKTRACKING: {"type": "integer"}}}
    ran: list[Any] = []
    model = ScriptedModel([kit.calls_response(("c1", "t", pathological_keys(40_000))), "ok"])  # ~1 MB: minutes on the loop
    agent = Agent(model, tools=[Tool("t", "T.", schema, lambda a, c: ran.append(1) or "ran")])
    seen = run_watched(agent, kit)
    assert seen.count("tool/call") >= 10  # the loop kept running while the call was checked
    (result,) = results(agent.session)
    assert ran == []
    assert result.data["error"] == {"name": "ValidationTimedOut", "code": "invalid_arguments"}
    assert "could not check these arguments within 1 s" in text(result)
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]


def test_a_cancel_while_arguments_are_checked_off_the_loop_ends_the_check(kit: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validation, "VALIDATION_SECONDS", 120.0)
    children: list[Any] = []
    spawn = asyncio.create_subprocess_exec

    async def spawn_and_keep(*args: Any, **kwargs: Any) -> Any:
        child = await spawn(*args, **kwargs)
        children.append(child)
        return child

    monkeypatch.setattr(asyncio, "create_subprocess_exec", spawn_and_keep)
    schema = {"type": "object", "patternProperties": {BACKTRACKING: {"type": "integer"}}}
    model = ScriptedModel([kit.calls_response(("c1", "t", pathological_keys(40_000))), "ok"])
    agent = Agent(model, tools=[Tool("t", "T.", schema, lambda a, c: "ran")])
    run_watched(agent, kit, cancel_when_checking=True)
    (child,) = children
    assert child.returncode is not None  # killed with the call, not left to run for minutes
    (result,) = results(agent.session)
    assert result.data["error"]["code"] == "aborted_before_dispatch" and "while its arguments were checked" in text(result)
    assert kit.turn_ends(agent.session)[0]["kind"] == "aborted"


def test_arguments_checked_off_the_loop_get_the_same_answers_as_on_it(kit: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^(?!x)[a-z]+$"}, "blob": {"type": "string"}},
        "required": ["name"],
    }
    ran: list[Any] = []
    bad, good = json.dumps({"name": "Xyz", "blob": "b" * 2000}), json.dumps({"name": "abc", "blob": "b" * 2000})
    model = ScriptedModel([kit.calls_response(("c1", "t", bad)), kit.calls_response(("c2", "t", good)), "ok"])
    agent = Agent(model, tools=[Tool("t", "T.", schema, lambda a, c: ran.append(a["name"]) or "ran")])
    assert ArgumentValidator("t", schema).off_loop(len(bad))
    drive(agent, kit.user("go"))
    first, second = results(agent.session)
    assert first.data["error"]["code"] == "invalid_arguments"
    assert '/name: "Xyz" does not match "^(?!x)[a-z]+$" (got "Xyz")' in text(first)
    assert ran == ["abc"] and text(second) == "ran"


def test_where_no_child_process_can_start_the_check_runs_on_the_loop_after_all(kit: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_processes(*args: Any, **kwargs: Any) -> Any:  # what a sandbox without fork/exec answers
        raise PermissionError("operation not permitted")

    monkeypatch.setattr(asyncio, "create_subprocess_exec", no_processes)
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(?!x)[a-z]+$"}, "blob": {"type": "string"}}}
    model = ScriptedModel([kit.calls_response(("c1", "t", json.dumps({"name": "Xyz", "blob": "b" * 2000}))), "ok"])
    agent = Agent(model, tools=[Tool("t", "T.", schema, lambda a, c: "ran")])
    drive(agent, kit.user("go"))
    (result,) = results(agent.session)
    assert result.data["error"]["code"] == "invalid_arguments" and '/name: "Xyz" does not match' in text(result)
