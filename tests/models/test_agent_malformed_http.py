"""Over real HTTP: a streamed tool call without a name never stalls the session.

The response is refused when it is assembled (the turn ends with ``malformed_response``), so
nothing unsendable reaches the log and the next turn's request is built and answered.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dshkit import create_user_message
from dshkit.agent import Agent, Tool
from dshkit.models import Provider
from dshkit.models.chat.model import OpenAICompatibleModel
from dshkit.session import Session, project_request


async def look(arguments: Any, ctx: Any) -> str:
    return "looked"


def nameless_call(wire: Any) -> Any:
    call = {"index": 0, "id": "call_0", "type": "function", "function": {"arguments": ""}}
    return wire.sse_reply(
        [
            wire.chunk(role="assistant", content="Let me look.", response_id="resp-1"),
            wire.chunk(tool_calls=[call], response_id="resp-1"),
            wire.chunk(tool_calls=[wire.tool_call_args(0, "{}")], response_id="resp-1"),
            wire.chunk(finish="tool_calls", response_id="resp-1"),
            wire.DONE,
        ]
    )


def test_a_nameless_tool_call_is_refused_and_the_next_turn_is_sent_and_answered(loopback: Any, wire: Any) -> None:
    loopback.reply(nameless_call(wire), wire.sse_reply(wire.answer("Here you go", response_id="resp-2")))
    model = OpenAICompatibleModel("deepseek-chat", Provider(loopback.base_url, api_key="sk-test", name="deepseek", timeout=5.0, retry_backoff=0.01))
    session = Session()
    agent = Agent(model, session=session, tools=[Tool("look", "look around", {"type": "object"}, look)])

    async def main() -> None:
        async with model:
            agent.followup(create_user_message("look around", source={"kind": "user"}))
            await agent.when_idle()
            model.request_body(project_request(session))  # the log still builds a request
            agent.followup(create_user_message("try again", source={"kind": "user"}))
            await agent.when_idle()

    asyncio.run(main())
    ends = [event.data["reason"] for event in session.events if event.type == "turn/end"]
    assert ends[0]["kind"] == "error" and ends[0]["error"]["code"] == "malformed_response"
    assert ends[1] == {"kind": "completed"}
    assert [event.type for event in session.events if event.type == "tool/result"] == []
    assert len(loopback.received) == 2
    sent = loopback.received[1].json["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [("user", "look around"), ("user", "try again")]
    answers = [event.data["message"].text for event in session.events if event.type == "assistant/message"]
    assert answers == ["Here you go"]
