"""`DshkitSession` behind a real OpenAI Agents SDK `Runner`, with an offline model."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")

from agents import Agent, Runner, function_tool  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary  # noqa: E402

from dshkit.interop.openai_agents import DshkitSession  # noqa: E402
from dshkit.session import Session  # noqa: E402
from dshkit.session._verify import check_events  # noqa: E402


def _text(item_id: str, text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=item_id, role="assistant", status="completed", type="message",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class ScriptedResponses(Model):
    """Answers from a script; records the input of every call (what the session gave the model)."""

    def __init__(self, outputs: list[list[Any]]) -> None:
        self.outputs = list(outputs)
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:  # noqa: A002
        self.inputs.append(input)
        return ModelResponse(output=self.outputs.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - not used
        raise NotImplementedError


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _script() -> list[list[Any]]:
    return [
        [ResponseReasoningItem(id="rs_1", type="reasoning", summary=[Summary(type="summary_text", text="use add")], encrypted_content="ENC1"),
         ResponseFunctionToolCall(id="fc_1", call_id="call_1", name="add", arguments='{"a": 2, "b": 3}', type="function_call", status="completed")],
        [_text("msg_1", "2 + 3 = 5")],
        [_text("msg_2", "hello again")],
        [_text("msg_3", "bye")],
    ]


def test_three_turns_over_a_dshkit_log(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    model = ScriptedResponses(_script())
    agent = Agent(name="calc", instructions="be brief", model=model, tools=[add])

    async def run() -> list[Any]:
        session = DshkitSession("conv-1", path)
        outputs = []
        for prompt in ("what is 2 + 3?", "hi", "bye"):
            result = await Runner.run(agent, prompt, session=session, run_config=agents.RunConfig(tracing_disabled=True))
            outputs.append(result.final_output)
        items = await session.get_items()
        session.close()
        return [outputs, items]

    outputs, items = asyncio.run(run())
    assert outputs == ["2 + 3 = 5", "hello again", "bye"]
    # The third turn's model call saw the whole history, kept by the session.
    last_input = model.inputs[-1]
    assert [item.get("id") for item in last_input if item.get("id")] == ["rs_1", "fc_1", "msg_1", "msg_2"]
    assert [item.get("type", "message") for item in items] == [
        "message", "reasoning", "function_call", "function_call_output", "message", "message", "message", "message", "message",
    ]
    reasoning = items[1]
    assert reasoning["encrypted_content"] == "ENC1" and reasoning["summary"][0]["text"] == "use add"
    assert items[3]["call_id"] == "call_1" and items[3]["output"] == "5"

    reopened = DshkitSession("conv-1", path)
    assert asyncio.run(reopened.get_items()) == items
    assert asyncio.run(reopened.get_items(limit=2)) == items[-2:]
    assert [m.id for m in reopened.log.messages() if m.role == "assistant"] == ["rs_1", "msg_1", "msg_2", "msg_3"]
    reopened.close()
    verify = subprocess.run([sys.executable, "-m", "dshkit", "log", "verify", str(path)], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_pop_clear_and_retry_keep_history_and_a_sound_log(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    user = {"role": "user", "content": "hi"}
    answer = {"id": "msg_9", "type": "message", "role": "assistant", "status": "completed",
              "content": [{"type": "output_text", "text": "hello", "annotations": []}]}
    call = {"type": "function_call", "id": "fc_9", "call_id": "c9", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c9", "output": "done"}

    async def run() -> None:
        session = DshkitSession("s", path)
        await session.add_items([user, answer])
        await session.add_items([user, answer])  # a retry adds nothing
        assert await session.get_items() == [user, answer]
        await session.add_items([call, output])
        assert await session.pop_item() == output  # the call stays, waiting for its output again
        assert await session.get_items() == [user, answer, call]
        with pytest.raises(ValueError, match="'c9' still wait for their output"):
            await session.pop_item()
        await session.add_items([output])
        assert await session.pop_item() == output
        await session.add_items([output])
        assert await session.get_items() == [user, answer, call, output]
        await session.clear_session()
        assert await session.get_items() == [] and await session.pop_item() is None
        await session.add_items([answer])  # the same item again after a clear: a new message id
        assert await session.get_items() == [answer]
        session.close()

    asyncio.run(run())
    log = Session.open(path, read_only=True)
    assert check_events(log.events) == []
    ids_ever = {event.message.id for event in log.events if event.message is not None}
    assert "msg_9" in ids_ever and "fc_9" in ids_ever  # history kept: popped and cleared items stay in the log
    log.close()


def test_a_directory_location_holds_one_log_per_session(tmp_path: Path) -> None:
    async def run() -> None:
        first, second = DshkitSession("a", tmp_path), DshkitSession("b", tmp_path)
        await first.add_items([{"role": "user", "content": "one"}])
        await second.add_items([{"role": "developer", "content": "rules"}])
        assert await second.get_items() == [{"role": "developer", "content": "rules"}]
        first.close()
        second.close()

    asyncio.run(run())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "b.jsonl"]
