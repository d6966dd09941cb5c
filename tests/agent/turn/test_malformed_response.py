"""A response the model could not legally be sent back is refused when it is assembled.

A logged assistant message is part of every later request; one whose tool call has no name (or
repeats a call id) would make every later request fail to build, for good. Such a response is the
step's failure (`MalformedResponseError`, code ``malformed_response``): its output is discarded,
the turn ends with the error, and the next turn works.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel
from dshkit.models.chat.projection import chat_body
from dshkit.models.errors import MalformedResponseError
from dshkit.session import Session, project_request

NAMELESS = [
    {"type": "text_delta", "text": "Let me look."},
    {"type": "tool_call_delta", "index": 0, "id": "c1", "name": None, "arguments": "{}"},
    {"type": "finish", "reason": "tool_calls"},
]
# index 1 has no id, so it would be named call-1: the id index 0 already has
COLLIDING = [
    {"type": "tool_call_delta", "index": 0, "id": "call-1", "name": "look", "arguments": "{}"},
    {"type": "tool_call_delta", "index": 1, "id": None, "name": "look", "arguments": "{}"},
    {"type": "finish", "reason": "tool_calls"},
]
REPEATED = [
    {"type": "tool_call_delta", "index": 0, "id": "c1", "name": "look", "arguments": "{}"},
    {"type": "tool_call_delta", "index": 1, "id": "c1", "name": "look", "arguments": "{}"},
    {"type": "finish", "reason": "tool_calls"},
]


async def look(arguments: Any, ctx: Any) -> str:
    return "looked"


def look_tool() -> Tool:
    return Tool("look", "look around", {"type": "object"}, look)


def chat_request_builds(session: Session) -> None:
    """The request the log describes can be turned into a chat-completions body (raises if not)."""
    chat_body(project_request(session), model="m")


@pytest.mark.parametrize(
    ("response", "what"),
    [(NAMELESS, "tool call 0 .*no name"), (COLLIDING, "call id 'call-1'"), (REPEATED, "call id 'c1'")],
    ids=["no-name", "synthesized-id-collides", "repeated-id"],
)
def test_an_unsendable_response_is_the_steps_failure_and_the_next_turn_works(kit: Any, response: Any, what: str) -> None:
    model = ScriptedModel([response, "all good"])
    agent = Agent(model, tools=[look_tool()])

    kit.run_followup(agent, kit.user("look around"))
    session = agent.session
    (end,) = kit.turn_ends(session)
    assert end["kind"] == "error"
    assert end["error"]["code"] == "malformed_response"
    assert end["error"]["name"] == "MalformedResponseError"
    assert re.search(what, end["error"]["message"]), end["error"]["message"]
    # its output is discarded: chunks stay in the log, uncited; no message, no tool result
    assert kit.of_type(session, "assistant/message") == []
    assert kit.of_type(session, "tool/result") == []
    assert kit.of_type(session, "assistant/chunk") != []
    assert kit.types(session) == [
        "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start", "user/message", "request/header", "step/end", "turn/end",
    ]
    assert session.pending_tool_calls() == ()
    chat_request_builds(session)

    kit.run_followup(agent, kit.user("try again"))
    assert [r["kind"] for r in kit.turn_ends(session)] == ["error", "completed"]
    assert [m.text for m in model.requests[1].messages] == ["look around", "try again"]
    chat_request_builds(session)


def test_a_refused_response_is_offered_to_request_error_and_may_be_retried(kit: Any) -> None:
    seen: list[BaseException] = []

    def request_error(ctx: Any) -> bool:
        seen.append(ctx.error)
        return True

    model = ScriptedModel([NAMELESS, kit.calls_response(("c2", "look", "{}")), "done"])
    agent = Agent(model, tools=[look_tool()], hooks={"request_error": request_error})

    kit.run_followup(agent, kit.user("look around"))
    assert len(seen) == 1 and isinstance(seen[0], MalformedResponseError)
    assert seen[0].code == "malformed_response"
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]
    (call_message, _) = [e.data["message"] for e in kit.of_type(agent.session, "assistant/message")]
    assert [block["name"] for block in call_message.tool_calls] == ["look"]
    chat_request_builds(agent.session)


def test_a_nameless_call_cut_by_max_tokens_is_dropped_not_refused(kit: Any) -> None:
    truncated = [*NAMELESS[:2], {"type": "finish", "reason": "max_tokens"}]
    agent = Agent(ScriptedModel([truncated]), tools=[look_tool()])

    kit.run_followup(agent, kit.user("look around"))
    assert kit.turn_ends(agent.session) == [{"kind": "max_tokens"}]
    (message,) = [e.data["message"] for e in kit.of_type(agent.session, "assistant/message")]
    assert message.text == "Let me look." and message.tool_calls == ()
    chat_request_builds(agent.session)
