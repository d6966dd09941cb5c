"""Automatic compaction in a running agent: long runs, overflow, queued input, crash, cancel, refusal."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from support import DSHKIT_PATH

import dshkit
from dshkit.agent import Agent, Compaction, CompactionFailed
from dshkit.agent._compaction.tokens import TokenMeter
from dshkit.agent.compaction import SUMMARY_NOT_SMALLER
from dshkit.agent._compaction.summary import SUMMARY_SYSTEM, is_summary
from dshkit.models import ScriptedModel
from dshkit.models.protocol import CONTEXT_WINDOW_EXCEEDED, ModelError
from dshkit.session import Session, project_request
from dshkit.session._transcript import render
from dshkit.session._verify import check_events
from tests.agent.long_run import LoopModel, read_tool



def user(text: str) -> dshkit.Message:
    return dshkit.create_user_message(text, source={"kind": "user"})


def of_type(session: Session, event_type: str) -> list[Any]:
    return [event for event in session.events if event.type == event_type]


class GateSummarizer:
    """A summarizer that writes `text` once `release` is set (tests act while it waits)."""

    provider = "gate"
    model = "gate"

    def __init__(self, text: str = "The user asked twice; answered once.") -> None:
        self.text = text
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.requests: list[Any] = []

    def stream(self, request: Any, cancel: Any = None) -> Any:
        self.requests.append(request)
        return self._run()

    async def _run(self) -> Any:
        self.started.set()
        await self.release.wait()
        yield {"type": "text_delta", "text": self.text}
        yield {"type": "finish", "reason": "stop"}


SMALL = Compaction(context_window=2000, threshold=0.5, keep_recent_tokens=100)
LONG_ANSWER = "a" * 4000  # ~1,000 tokens: the second request is over the threshold (1,000)


async def first_turn(agent: Agent) -> None:
    agent.followup(user("Tell me everything."))
    await agent.when_idle()


async def short_turn(agent: Agent, text: str = "Short?") -> None:
    agent.followup(user(text))
    await agent.when_idle()


@pytest.mark.parametrize(("steps", "window"), [(500, 32_000), (2000, 16_000)])
def test_a_long_run_in_a_small_window_runs_to_its_end(tmp_path: Path, steps: int, window: int) -> None:
    path = tmp_path / "run.jsonl"

    async def main() -> tuple[LoopModel, int]:
        model = LoopModel(steps)
        model.sample_every = steps // 10
        session = Session.create(path)
        agent = Agent(model, session=session, tools=[read_tool()], compaction=Compaction(context_window=window))
        model.session = session
        agent.followup(user("Read every page."))
        await agent.when_idle()
        for prefix, request in model.prefixes:  # each request is still the projection of its log prefix
            assert project_request(session, at_seq=prefix - 1) == request
        reading = agent.tokens
        session.close()
        return model, reading

    model, reading = asyncio.run(main())
    assert model.calls == steps + 1 and model.summaries > 0
    assert model.largest <= 0.8 * window  # no request passed the threshold by the meter
    with Session.open(path, read_only=True) as session:
        assert check_events(session.events) == []
        assert [event.data["reason"]["kind"] for event in of_type(session, "turn/end")] == ["completed"]
        assert session.messages()[-1].text == "All pages read."
        assert sum(1 for message in session.messages() if is_summary(message)) == 1  # merged, never nested
        starts, ends = of_type(session, "compaction/start"), of_type(session, "compaction/end")
        assert len(starts) == len(ends) == len(of_type(session, "compaction/summary")) == model.summaries
        assert all("error" not in event.data for event in ends)
        assert TokenMeter(session).reading() == reading  # re-open: the same reading, from the log alone
    result = subprocess.run(
        [sys.executable, "-m", "dshkit", "log", "verify", str(path)], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": DSHKIT_PATH},
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_summary_event_records_range_seqs_tokens_and_model() -> None:
    async def main() -> Agent:
        summarizer = GateSummarizer()
        summarizer.release.set()
        settings = Compaction(context_window=2000, threshold=0.5, keep_recent_tokens=100, summarizer=summarizer)
        agent = Agent(ScriptedModel([LONG_ANSWER, "Short."]), compaction=settings)
        await first_turn(agent)
        before = agent.session.messages()
        agent.followup(user("And now?"))
        await agent.when_idle()
        return agent

    agent = asyncio.run(main())
    session = agent.session
    (summary_event,) = of_type(session, "compaction/summary")
    data = summary_event.data
    replaced = [session.events[seq] for seq in data["shadowed_seqs"]]
    assert [event.type for event in replaced] == ["user/message", "assistant/message"]
    assert data["shadowed_range"] == {"start": replaced[0].seq, "end": replaced[-1].seq}
    assert data["provider"] == "gate" and data["model"] == "gate"
    assert data["tokens_after"] < data["tokens_before"] and data["shadowed_token_count"] > 1000
    message_event = session.events[summary_event.seq + 1]
    assert message_event.type == "user/message" and message_event.surface_op["op"] == "replace"
    assert message_event.source_event_seqs == (summary_event.seq - 1, summary_event.seq, *data["shadowed_seqs"])
    summary = message_event.data
    assert summary.source == {"kind": "plugin", "plugin": "compact", "compaction_id": data["compaction_id"]}
    messages = session.messages()
    assert messages[0] is summary and messages[1].text == "And now?" and messages[2].text == "Short."
    assert of_type(session, "compaction/end")[0].data == {"compaction_id": data["compaction_id"], "turn": 2}
    lines = list(render(session.events, session_id=session.id, created_at=session.created_at, where="memory"))
    assert f"    #{summary_event.seq} compaction summary: 2 messages ({data['shadowed_token_count']} tokens) by gate/gate; " \
        f"request {data['tokens_before']} -> {data['tokens_after']} tokens" in lines
    # `dshkit log show` reads the start and the end from the same description of the compaction.
    start, end = of_type(session, "compaction/start")[0], of_type(session, "compaction/end")[0]
    ids = [event.message.id for event in replaced]
    assert f"    #{start.seq} compaction start (threshold, turn 2): 2 messages {ids[0]} .. {ids[-1]} -> summary {summary.id}" in lines
    assert f"    #{end.seq} compaction end: summary {summary.id}" in lines
    assert "        summary: The user asked twice; answered once." in lines


def test_an_overflow_error_compacts_once_and_retries_the_step() -> None:
    overflow = ModelError("prompt is too long", code=CONTEXT_WINDOW_EXCEEDED)
    model = ScriptedModel([LONG_ANSWER, [overflow], "The user asked for everything; got a long answer.", "Done."])
    settings = Compaction(context_window=100_000, keep_recent_tokens=10)  # far below the threshold

    async def main() -> Agent:
        agent = Agent(model, compaction=settings)
        await first_turn(agent)
        agent.followup(user("Go on."))
        await agent.when_idle()
        return agent

    agent = asyncio.run(main())
    assert [end.data["reason"]["kind"] for end in of_type(agent.session, "turn/end")] == ["completed", "completed"]
    assert of_type(agent.session, "compaction/start")[0].data["reason"] == "overflow"
    assert model.requests[2].system == SUMMARY_SYSTEM
    retried = model.requests[3]
    assert is_summary(retried.messages[0]) and [m.text for m in retried.messages[1:]] == ["Go on."]


def test_a_second_overflow_ends_the_turn_with_the_code() -> None:
    overflow = ModelError("prompt is too long", code=CONTEXT_WINDOW_EXCEEDED)
    model = ScriptedModel([LONG_ANSWER, [overflow], "Everything was asked; a long answer.", [overflow]])

    async def main() -> Agent:
        agent = Agent(model, compaction=Compaction(context_window=100_000, keep_recent_tokens=10))
        await first_turn(agent)
        agent.followup(user("Go on."))
        await agent.when_idle()
        return agent

    agent = asyncio.run(main())
    reason = of_type(agent.session, "turn/end")[-1].data["reason"]
    assert reason["kind"] == "error" and reason["error"]["code"] == CONTEXT_WINDOW_EXCEEDED
    assert len(of_type(agent.session, "compaction/start")) == 1  # compacted once, not in a loop


def test_input_queued_during_a_summary_keeps_its_ids_and_runs() -> None:
    steer, later = user("Also check the tests."), user("Then commit.")

    async def main() -> Agent:
        summarizer = GateSummarizer()
        settings = Compaction(context_window=2000, threshold=0.5, keep_recent_tokens=100, summarizer=summarizer)
        agent = Agent(ScriptedModel([LONG_ANSWER, "Checked.", "Tests too.", "Committed."]), compaction=settings)
        await first_turn(agent)
        agent.followup(user("Next."))
        await summarizer.started.wait()  # the turn is inside its compaction now
        agent.steer(steer)
        agent.followup(later)
        summarizer.release.set()
        await agent.when_idle()
        return agent

    agent = asyncio.run(main())
    logged = {event.data.id: event.data for event in of_type(agent.session, "user/message")}
    assert logged[steer.id] is steer and logged[later.id] is later
    assert [m.text for m in agent.session.messages()][-4:] == ["Also check the tests.", "Tests too.", "Then commit.", "Committed."]
    assert len(agent.inbox) == 0


def test_input_during_an_on_demand_compaction_waits_for_it() -> None:
    waiting = user("After the compaction.")

    async def main() -> tuple[Agent, Any]:
        summarizer = GateSummarizer()
        agent = Agent(ScriptedModel([LONG_ANSWER, "Ok.", "Yes."]), compaction=Compaction(context_window=50_000, keep_recent_tokens=10, summarizer=summarizer))
        await first_turn(agent)
        await short_turn(agent)
        task = asyncio.ensure_future(agent.compact(instructions="Keep the file names."))
        await summarizer.started.wait()
        agent.followup(waiting)
        assert agent.status == "idle"  # maintenance holds the turn back
        summarizer.release.set()
        summary = await task
        await agent.when_idle()
        return agent, (summary, summarizer.requests[0])

    agent, (summary, request) = asyncio.run(main())
    assert "Keep the file names." in request.messages[0].text
    assert of_type(agent.session, "compaction/start")[0].data["turn"] is None
    assert agent.session.messages()[0] is summary
    assert [m.text for m in agent.session.messages()[-2:]] == ["After the compaction.", "Yes."]
    assert any(event.data.id == waiting.id for event in of_type(agent.session, "user/message"))


def test_a_previous_summary_is_merged_not_nested() -> None:
    async def main() -> tuple[Agent, GateSummarizer]:
        summarizer = GateSummarizer()
        summarizer.release.set()
        script = [LONG_ANSWER, "Ok.", "b" * 4000, "Ok again."]
        agent = Agent(ScriptedModel(script), compaction=Compaction(context_window=50_000, keep_recent_tokens=10, summarizer=summarizer))
        await first_turn(agent)
        await short_turn(agent)
        assert await agent.compact() is not None
        await short_turn(agent, "More.")
        await short_turn(agent)
        assert await agent.compact() is not None
        return agent, summarizer

    agent, summarizer = asyncio.run(main())
    second = summarizer.requests[1].messages[0].text
    assert "<previous-checkpoint>\nThe user asked twice" in second and "compacted-summary" not in second
    messages = agent.session.messages()
    assert sum(1 for message in messages if is_summary(message)) == 1 and is_summary(messages[0])


def test_cancel_during_a_summary_aborts_and_logs_the_failed_compaction() -> None:
    async def main() -> tuple[Agent, Any]:
        summarizer = GateSummarizer()
        agent = Agent(ScriptedModel([LONG_ANSWER]), compaction=Compaction(context_window=2000, threshold=0.5, keep_recent_tokens=100, summarizer=summarizer))
        await first_turn(agent)
        agent.followup(user("Next."))
        await summarizer.started.wait()
        before = agent.session.messages()
        agent.cancel("user")
        await agent.when_idle()
        return agent, before

    agent, before = asyncio.run(main())
    assert agent.session.messages() == before  # nothing replaced
    (end,) = of_type(agent.session, "compaction/end")
    assert end.data["error"].startswith("cancelled")
    assert not of_type(agent.session, "compaction/summary")
    assert of_type(agent.session, "turn/end")[-1].data["reason"] == {"kind": "aborted", "cause": "user"}
    assert check_events(agent.session.events) == []


def test_a_summary_that_does_not_shrink_its_source_is_refused() -> None:
    async def main() -> Agent:
        summarizer = GateSummarizer(text="x" * 20_000)
        summarizer.release.set()
        agent = Agent(ScriptedModel([LONG_ANSWER, "Fine."]), compaction=Compaction(context_window=2000, threshold=0.5, keep_recent_tokens=100, summarizer=summarizer))
        await first_turn(agent)
        before = agent.session.messages()
        agent.followup(user("Next."))  # the automatic compaction fails; the step goes on uncompacted
        await agent.when_idle()
        assert agent.session.messages()[: len(before)] == before
        with pytest.raises(CompactionFailed) as failure:
            await agent.compact()
        assert failure.value.code == SUMMARY_NOT_SMALLER
        return agent

    agent = asyncio.run(main())
    ends = of_type(agent.session, "compaction/end")
    assert len(ends) == 2 and all(end.data["error"].startswith(SUMMARY_NOT_SMALLER) for end in ends)
    assert not any(is_summary(message) for message in agent.session.messages())
    assert of_type(agent.session, "turn/end")[-1].data["reason"] == {"kind": "completed"}


CRASHING = """
import asyncio, os, sys
import dshkit
from dshkit.agent import Agent, Compaction
from dshkit.models import ScriptedModel
from dshkit.session import Session

class Crash:
    provider = model = "crash"
    def stream(self, request, cancel=None):
        return self.run()
    async def run(self):
        os._exit(3)  # the process dies while the summary is being written
        yield {}

async def main():
    session = Session.create(sys.argv[1], durability="always")
    agent = Agent(ScriptedModel(["a" * 4000]), session=session,
                  compaction=Compaction(context_window=2000, threshold=0.5, keep_recent_tokens=100, summarizer=Crash()))
    agent.followup(dshkit.create_user_message("Tell me everything.", source={"kind": "user"}))
    await agent.when_idle()
    agent.followup(dshkit.create_user_message("Next.", source={"kind": "user"}))
    await agent.when_idle()

asyncio.run(main())
"""


def test_a_crash_between_start_and_end_opens_repairs_and_continues(tmp_path: Path) -> None:
    path = tmp_path / "crash.jsonl"
    env = {**os.environ, "PYTHONPATH": DSHKIT_PATH}
    result = subprocess.run([sys.executable, "-c", CRASHING, str(path)], env=env, capture_output=True, text=True)
    assert result.returncode == 3, result.stderr
    with Session.open(path, read_only=True) as session:
        assert session.events[-1].type == "compaction/start"
    session = Session.open(path)
    closers = [event.type for event in session.events][-3:]
    assert closers == ["compaction/end", "step/end", "turn/end"]
    start = of_type(session, "compaction/start")[0]
    assert session.events[-3].data == {"compaction_id": start.data["compaction_id"], "turn": 2, "error": session.events[-3].data["error"]}
    assert "interrupted" in session.events[-3].data["error"]
    assert check_events(session.events) == []
    assert [m.text for m in session.messages()] == ["Tell me everything.", "a" * 4000, "Next."]

    async def resume() -> Agent:
        summarizer = GateSummarizer()
        summarizer.release.set()
        agent = Agent(ScriptedModel(["Resumed."]), session=session, compaction=Compaction(context_window=2000, threshold=0.5, keep_recent_tokens=100, summarizer=summarizer))
        agent.followup(user("Go on."))
        await agent.when_idle()
        return agent

    agent = asyncio.run(resume())
    assert agent.session.messages()[-1].text == "Resumed." and is_summary(agent.session.messages()[0])
    assert check_events(agent.session.events) == []
    session.close()


def test_an_unknown_window_warns_once_and_compaction_stays_off() -> None:
    async def main() -> Agent:
        agent = Agent(ScriptedModel([LONG_ANSWER, "Two."]), compaction=Compaction())
        await first_turn(agent)
        agent.followup(user("Again."))
        await agent.when_idle()
        return agent

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent = asyncio.run(main())
    assert [str(w.message) for w in caught if w.category is RuntimeWarning] == [
        "compaction is off: the context window of scripted/scripted is unknown (give Compaction(context_window=...))"
    ]
    assert agent.context_window is None and not of_type(agent.session, "compaction/start")


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="threshold"):
        Compaction(threshold=1.5)
    with pytest.raises(ValueError, match="context_window"):
        Compaction(context_window=0)
    with pytest.raises(TypeError, match="summarizer"):
        Compaction(summarizer="gpt")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Agent compaction"):
        Agent(ScriptedModel([]), compaction={"context_window": 1000})  # type: ignore[arg-type]


class RecordingSummarizer:
    """A summarizer that answers each part with a numbered summary and keeps every request."""

    provider = model = "recorder"

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def stream(self, request: Any, cancel: Any = None) -> Any:
        self.requests.append(request)
        return self._run(len(self.requests))

    async def _run(self, number: int) -> Any:
        yield {"type": "text_delta", "text": f"Checkpoint {number}: the user wants the release notes of every module."}
        yield {"type": "finish", "reason": "stop"}


def test_a_range_too_big_for_one_summary_call_is_summarized_in_parts_keeping_the_request() -> None:
    task = "Write the release notes of every module, one section each."
    answers = [f"Module {n}: " + "detail " * 500 for n in range(6)]  # ~900 tokens each, in a 4,000-token window

    async def main() -> tuple[Agent, RecordingSummarizer]:
        summarizer = RecordingSummarizer()
        settings = Compaction(context_window=4000, keep_recent_tokens=100, summarizer=summarizer)
        agent = Agent(ScriptedModel([*answers, "Done."]), compaction=settings)
        await short_turn(agent, task)
        for _ in answers[1:]:
            await short_turn(agent, "Next module.")  # the fifth request is over the threshold: one compaction
        return agent, summarizer

    agent, summarizer = asyncio.run(main())
    texts = [request.messages[0].text for request in summarizer.requests]
    assert len(texts) > 1  # one call a part
    assert all("omitted" not in text for text in texts)
    assert task in texts[0] and all(f"<first-user-request>\n{task}\n</first-user-request>" in text for text in texts[1:])
    for number, text in enumerate(texts[1:], 1):  # each part merges into the previous part's summary
        assert f"<previous-checkpoint>\nCheckpoint {number}: " in text and f"part {number + 1} of {len(texts)}" in text
    shown = "".join(texts)
    assert all(f"Module {n}: " in shown for n in range(4))  # every replaced answer reached the summarizer (4 is kept)
    (summary_event,) = [event for event in agent.session.events if event.type == "compaction/summary"]
    assert summary_event.data["summary"][0]["text"].startswith(f"Checkpoint {len(texts)}: ")


def test_a_cancelled_compact_logs_why() -> None:
    async def main() -> Agent:
        summarizer = GateSummarizer()
        agent = Agent(ScriptedModel([LONG_ANSWER, "Ok."]), compaction=Compaction(context_window=50_000, keep_recent_tokens=10, summarizer=summarizer))
        await first_turn(agent)
        await short_turn(agent)
        task = asyncio.ensure_future(agent.compact())
        await summarizer.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return agent

    agent = asyncio.run(main())
    (end,) = of_type(agent.session, "compaction/end")
    assert end.data["error"] == "cancelled: the task running the compaction was cancelled before the summary was written"
    assert not of_type(agent.session, "compaction/summary") and check_events(agent.session.events) == []
