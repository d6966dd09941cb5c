"""Argument text Python's json parses but dshkit cannot hold (a big integer, 1e999, NaN) or nests too
deep: one honest result per call, never a crashed turn, and a log every HTTP projection rebuilds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dshkit.agent import Agent, Amend, Tool
from dshkit.agent._tools.validation import MAX_ARGUMENT_DEPTH, MAX_SENDABLE_DEPTH, nests_deeper_than
from dshkit.models import ScriptedModel
from dshkit.models.anthropic.model import AnthropicModel
from dshkit.models.chat.model import OpenAICompatibleModel
from dshkit.models.responses.model import OpenAIResponsesModel
from dshkit.models.provider import Provider
from dshkit.session import project_request

BAD_NUMBERS = {
    "big integer": '{"n": 12345678901234567890123}',
    "1e999": '{"n": 1e999}',
    "NaN": '{"n": NaN}',
    "-Infinity": '{"n": -Infinity}',
}
GATES: dict[str, dict[str, Any]] = {
    "pre_tool hook": {"hooks": {"pre_tool": lambda ctx: None}},
    "post_tool hook": {"hooks": {"post_tool": lambda ctx: Amend("[redacted]")}},
    "ask policy": {"approval": "ask"},
    "never policy": {"approval": "never"},
}


def nested(depth: int) -> str:
    return '{"n": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def run_turns(agent: Agent, kit: Any, count: int) -> None:
    async def main() -> None:
        for index in range(count):
            agent.followup(kit.user(f"turn {index}"))
            await agent.when_idle()

    asyncio.run(main())


def make_agent(kit: Any, arguments: str, ran: list[Any], **options: Any) -> Agent:
    """Two calls in one response: `count` with `arguments`, then a good call of `echo` (always allowed)."""
    model = ScriptedModel([
        kit.calls_response(("c1", "count", arguments), ("c2", "echo", '{"n": 1}')), "done", "second turn",
    ])
    tools = [
        Tool("count", "Counts.", {"type": "object"}, lambda a, c: ran.append(a["n"]) or f"counted {a['n']}"),
        Tool("echo", "Echoes.", {"type": "object"}, lambda a, c: ran.append(a["n"]) or f"echo {a['n']}", approval="always"),
    ]
    return Agent(model, tools=tools, **options)


def results(session: Any) -> dict[str, Any]:
    by_call: dict[str, list[Any]] = {}
    for event in session.events:
        if event.type == "tool/result":
            by_call.setdefault(event.data["message"].source["call_id"], []).append(event.data)
    assert all(len(answers) == 1 for answers in by_call.values()), by_call  # exactly one result per call
    return {call_id: answers[0] for call_id, answers in by_call.items()}


def text(data: Any) -> str:
    return str(data["message"].content[0]["content"][0]["text"])


def assert_every_projection_builds(session: Any) -> None:
    request = project_request(session)
    models = [
        AnthropicModel("claude-test", Provider("http://127.0.0.1:9", api_key="k"), settings={"max_tokens": 64}),
        OpenAICompatibleModel("gpt-test", Provider("http://127.0.0.1:9/v1", api_key="k")),
        OpenAIResponsesModel("gpt-test", Provider("http://127.0.0.1:9/v1", api_key="k")),
    ]
    for model in models:
        assert model.request_body(request), type(model).__name__


@pytest.mark.parametrize("gate", list(GATES))
@pytest.mark.parametrize("number", list(BAD_NUMBERS))
def test_a_number_dshkit_cannot_hold_is_invalid_arguments_under_every_hook_and_policy(kit: Any, gate: str, number: str) -> None:
    ran: list[Any] = []
    agent = make_agent(kit, BAD_NUMBERS[number], ran, **GATES[gate])
    run_turns(agent, kit, 2)
    answers = results(agent.session)
    bad = answers["c1"]
    assert bad["error"] == {"name": "InvalidArguments", "code": "invalid_arguments"}
    assert text(bad).startswith("Invalid arguments for count:") and "did not run" in text(bad)
    assert ran == [1]  # only the good call's body ran
    expected = "[redacted]" if gate == "post_tool hook" else "echo 1"
    assert "error" not in answers["c2"] and text(answers["c2"]) == expected  # its real result is kept
    assert not [e for e in agent.session.events if e.type == "approval/asked"]  # refused before any ask
    assert [end["kind"] for end in kit.turn_ends(agent.session)] == ["completed", "completed"]


@pytest.mark.parametrize("number", list(BAD_NUMBERS))
def test_without_a_gate_a_big_integer_still_runs_and_non_numbers_are_not_json(kit: Any, number: str) -> None:
    ran: list[Any] = []
    agent = make_agent(kit, BAD_NUMBERS[number], ran)
    run_turns(agent, kit, 2)
    bad = results(agent.session)["c1"]
    if number == "big integer":
        assert "error" not in bad and text(bad) == "counted 12345678901234567890123"
    else:
        assert bad["error"]["code"] == "invalid_arguments"
        assert ran == [1]
    assert [end["kind"] for end in kit.turn_ends(agent.session)] == ["completed", "completed"]


@pytest.mark.parametrize("options", [{}, GATES["pre_tool hook"], GATES["never policy"]], ids=["plain", "hook", "policy"])
@pytest.mark.parametrize("depth", [MAX_ARGUMENT_DEPTH + 1, 400, MAX_SENDABLE_DEPTH])
def test_arguments_nested_past_the_limit_are_invalid_and_the_session_goes_on(kit: Any, options: Any, depth: int) -> None:
    ran: list[Any] = []
    agent = make_agent(kit, nested(depth), ran, **options)
    run_turns(agent, kit, 2)
    bad = results(agent.session)["c1"]
    assert bad["error"]["code"] == "invalid_arguments"
    assert f"nested deeper than {MAX_ARGUMENT_DEPTH} levels" in text(bad)
    assert [end["kind"] for end in kit.turn_ends(agent.session)] == ["completed", "completed"]
    assert_every_projection_builds(agent.session)


@pytest.mark.parametrize("depth", [MAX_SENDABLE_DEPTH + 1, 1000, 20_000])
def test_a_response_nested_too_deep_to_send_back_is_refused_and_the_session_goes_on(kit: Any, depth: int) -> None:
    ran: list[Any] = []
    agent = make_agent(kit, nested(depth), ran, hooks={"pre_tool": lambda ctx: None})
    run_turns(agent, kit, 2)
    ends = kit.turn_ends(agent.session)
    assert ends[0]["kind"] == "error" and ends[0]["error"]["code"] == "malformed_response"
    assert f"deeper than {MAX_SENDABLE_DEPTH} levels" in ends[0]["error"]["message"]
    assert ran == [] and results(agent.session) == {}  # nothing of the refused response is logged
    assert ends[1]["kind"] == "completed"  # the next turn works
    assert_every_projection_builds(agent.session)


def test_the_depth_check_skips_brackets_inside_strings() -> None:
    assert not nests_deeper_than('{"a": "' + "[" * 1000 + '"}', 10)
    assert not nests_deeper_than('{"a": "\\"' + "{" * 1000 + '"}', 10)
    assert nests_deeper_than("[" * 11 + "]" * 11, 10)
    assert not nests_deeper_than("[" * 10 + "]" * 10, 10)
    assert not nests_deeper_than("[[]]" * 100, 10)  # many brackets, shallow
