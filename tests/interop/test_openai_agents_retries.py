"""`DshkitSession.add_items` under the Agents SDK's retries: a re-added batch adds nothing, a
contradicting one is refused, and each call converts only its batch."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

agents = pytest.importorskip("agents")

from agents import Agent, Runner  # noqa: E402

import dshkit.interop.openai_agents as openai_agents  # noqa: E402
from dshkit.interop.openai_agents import DshkitSession  # noqa: E402
from dshkit.session import Session  # noqa: E402
from dshkit.session._verify import check_events  # noqa: E402

from tests.interop.test_openai_agents import ScriptedResponses, _script, add  # noqa: E402

RUN_CONFIG = agents.RunConfig(tracing_disabled=True)


class RecordingSession(DshkitSession):
    """A `DshkitSession` that keeps every batch the SDK hands `add_items`, as the SDK gave it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[list[Any]] = []

    async def add_items(self, items: list[Any]) -> None:
        self.batches.append(list(items))
        await super().add_items(items)


def _run_one_turn(path: Path) -> tuple[RecordingSession, list[dict[str, Any]]]:
    """One real `Runner.run`: the prompt, reasoning + a call + its output, then the answer."""
    agent = Agent(name="calc", instructions="be brief", model=ScriptedResponses(_script()), tools=[add])
    session = RecordingSession("conv", path)

    async def run() -> list[dict[str, Any]]:
        await Runner.run(agent, "what is 2 + 3?", session=session, run_config=RUN_CONFIG)
        return await session.get_items()

    return session, asyncio.run(run())


def _event_count(session: DshkitSession) -> int:
    return len(session.log.events)


def test_the_sdks_last_batches_added_again_add_nothing(tmp_path: Path) -> None:
    session, items = _run_one_turn(tmp_path / "s.jsonl")
    # The SDK saved the prompt, then the call with its output, then the answer.
    assert [[item.get("type", "message") for item in batch] for batch in session.batches] == [
        ["message"], ["reasoning", "function_call", "function_call_output"], ["message"],
    ]
    events = _event_count(session)
    for batch in session.batches[-2:]:  # retried in order: the call and its output, then the answer
        asyncio.run(DshkitSession.add_items(session, batch))
    whole_turn = [item for batch in session.batches for item in batch]  # the turn once more, as one batch
    asyncio.run(DshkitSession.add_items(session, whole_turn))
    assert asyncio.run(session.get_items()) == items
    assert _event_count(session) == events
    session.close()
    log = Session.open(tmp_path / "s.jsonl", read_only=True)
    assert check_events(log.events) == []
    log.close()


def test_a_partial_batch_added_again_adds_only_its_new_items(tmp_path: Path) -> None:
    session, items = _run_one_turn(tmp_path / "s.sqlite")
    prompt, reasoning, call, output, answer = items
    events = _event_count(session)

    async def run() -> list[dict[str, Any]]:
        await session.add_items([call, output])  # part of a stored batch
        await session.add_items([prompt, reasoning])  # an id-less item next to a stored one
        await session.add_items([output, answer])  # across two stored batches
        assert _event_count(session) == events
        follow_up = {"role": "user", "content": "and 3 + 4?"}
        await session.add_items([output, answer, follow_up])  # stored items, then a new one
        return await session.get_items()

    assert asyncio.run(run()) == [*items, {"role": "user", "content": "and 3 + 4?"}]
    assert _event_count(session) == events + 1
    session.close()
    reopened = DshkitSession("conv", tmp_path / "s.sqlite")
    assert asyncio.run(reopened.get_items()) == [*items, {"role": "user", "content": "and 3 + 4?"}]
    reopened.close()


def test_a_conflicting_batch_is_refused_and_adds_nothing(tmp_path: Path) -> None:
    session, items = _run_one_turn(tmp_path / "s.jsonl")
    prompt, reasoning, call, output, answer = items
    events = _event_count(session)
    other_output = {**output, "output": "6"}
    other_answer = {**answer, "content": [{"type": "output_text", "text": "2 + 3 = 6", "annotations": []}]}
    new = {"role": "user", "content": "new"}
    cases = [
        ([call, other_output], "item 1 of the batch \\(function_call_output of call 'call_1'\\) differs"),
        ([other_answer], "item 0 of the batch \\(id 'msg_1'\\) differs from the item stored"),
        ([new, answer], "item 1 of the batch is stored already \\(item 4\\) but item 0 before it is new"),
    ]
    for batch, message in cases:
        with pytest.raises(ValueError, match=message):
            asyncio.run(session.add_items(batch))
    assert _event_count(session) == events
    assert asyncio.run(session.get_items()) == items
    session.close()


def test_a_call_id_used_again_is_a_new_call(tmp_path: Path) -> None:
    """Some providers number calls per step: a new call with an old call id gets its own output."""

    def call(item_id: str) -> dict[str, Any]:
        return {"type": "function_call", "id": item_id, "call_id": "call_0", "name": "f", "arguments": "{}"}

    output_one = {"type": "function_call_output", "call_id": "call_0", "output": "1"}
    output_two = {"type": "function_call_output", "call_id": "call_0", "output": "2"}

    async def run() -> list[dict[str, Any]]:
        session = DshkitSession("s", tmp_path)
        await session.add_items([call("fc_a"), output_one])
        await session.add_items([call("fc_b"), output_two])
        await session.add_items([call("fc_b"), output_two])  # a retry of the second step
        items = await session.get_items()
        session.close()
        return items

    assert asyncio.run(run()) == [call("fc_a"), output_one, call("fc_b"), output_two]


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count the messages (or items) each call of converter `name` converts."""
    sizes: list[int] = []
    original = getattr(openai_agents, name)

    def counted(values: Any, *args: Any, **kwargs: Any) -> Any:
        values = list(values)
        sizes.append(len(values))
        return original(values, *args, **kwargs)

    monkeypatch.setattr(openai_agents, name, counted)
    return sizes


@pytest.mark.parametrize("turns", [10, 200])
def test_add_items_converts_only_its_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, turns: int) -> None:
    history = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"question {turn}"})
        history.append({"id": f"msg_{turn}", "type": "message", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": f"answer {turn}", "annotations": []}]})
    first = DshkitSession("s", tmp_path)
    asyncio.run(first.add_items(history))
    first.close()

    to_items = _counting(monkeypatch, "to_response_items")
    from_items = _counting(monkeypatch, "from_response_items")
    session = DshkitSession("s", tmp_path)
    assert asyncio.run(session.get_items(limit=2)) == history[-2:]
    assert to_items == [2 * turns]  # the log is read once
    to_items.clear()
    for step in range(5):
        batch = [{"role": "user", "content": f"more {step}"}, {"role": "user", "content": f"still more {step}"}]
        asyncio.run(session.add_items(batch))
        asyncio.run(session.add_items(batch))  # a retry converts nothing
    assert to_items == [2] * 5 and from_items == [2] * 5
    assert len(asyncio.run(session.get_items())) == 2 * turns + 10
    session.close()


def test_a_session_opened_on_a_log_pops_and_clears_what_the_log_holds(tmp_path: Path) -> None:
    """The stored items are read from the log before a pop or a clear changes it."""
    first, second = {"role": "user", "content": "one"}, {"role": "user", "content": "two"}
    session = DshkitSession("s", tmp_path)
    asyncio.run(session.add_items([first, second]))
    session.close()

    reopened = DshkitSession("s", tmp_path)
    assert asyncio.run(reopened.pop_item()) == second
    assert asyncio.run(reopened.get_items()) == [first]
    reopened.close()
    again = DshkitSession("s", tmp_path)
    assert asyncio.run(again.get_items()) == [first]
    asyncio.run(again.clear_session())
    assert asyncio.run(again.get_items()) == []
    again.close()


def test_a_run_resumed_after_a_tool_approval_keeps_each_item_once(tmp_path: Path) -> None:
    """The SDK's own resume (an approval interrupts the run): the call is saved before the output."""
    from agents import function_tool

    @function_tool(needs_approval=True)
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    agent = Agent(name="calc", instructions="be brief", model=ScriptedResponses(_script()), tools=[add])
    session = RecordingSession("conv", tmp_path / "s.jsonl")

    async def run() -> Any:
        first = await Runner.run(agent, "what is 2 + 3?", session=session, run_config=RUN_CONFIG)
        state = first.to_state()
        for interruption in first.interruptions:
            state.approve(interruption)
        return (await Runner.run(agent, state, session=session, run_config=RUN_CONFIG)).final_output

    assert asyncio.run(run()) == "2 + 3 = 5"
    items = asyncio.run(session.get_items())
    assert [item.get("type", "message") for item in items] == ["message", "reasoning", "function_call", "function_call_output", "message"]
    # Every batch the runs saved after the prompt, saved again (the prompt alone, an id-less item,
    # cannot be told from the same words said again once later items follow it).
    for batch in session.batches[1:]:
        asyncio.run(DshkitSession.add_items(session, batch))
    assert asyncio.run(session.get_items()) == items
    session.close()
