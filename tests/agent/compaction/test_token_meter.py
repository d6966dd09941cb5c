"""The token meter: provider usage where the log has it, the estimate after it, rebuilt on open."""

from __future__ import annotations

import asyncio
from pathlib import Path

import dshkit
from dshkit.agent import Agent, Compaction
from dshkit.agent._compaction.tokens import TokenMeter
from dshkit.agent._compaction.tokens import estimate_header, estimate_message, estimate_text, usage_tokens
from dshkit.models import Provider, ScriptedModel
from dshkit.session import Session
from dshkit.session._verify import check_events
from tests.agent.long_run import LoopModel, read_tool
from tests.session.dsh.scenarios import SCENARIOS
from support import DSHKIT_PATH


def user(text: str) -> dshkit.Message:
    return dshkit.create_user_message(text, source={"kind": "user"})


def answer(text: str, prompt_tokens: int | None = None) -> list[dict[str, object]]:
    chunks: list[dict[str, object]] = [{"type": "text_delta", "text": text}]
    if prompt_tokens is not None:
        chunks.append({"type": "usage", "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 7}})
    chunks.append({"type": "finish", "reason": "stop"})
    return chunks


def test_the_estimate_counts_four_characters_a_token_plus_overheads() -> None:
    assert estimate_text("x" * 400) == 100 and estimate_text("x" * 401) == 101
    assert estimate_message(user("x" * 400)) == 4 + 2 + 100  # message + one block + text
    result = dshkit.create_tool_result_message("c1", "y" * 40, is_error=False)
    assert estimate_message(result) == 4 + 2 + (40 + 8) // 4
    image = dshkit.create_user_message([{"type": "image", "url": "https://example.com/a.png"}], source={"kind": "user"})
    assert estimate_message(image) == 4 + 2 + 1200
    assert estimate_header({"system": "s" * 40, "tools": []}) == 10
    assert usage_tokens({"prompt_tokens": 10, "completion_tokens": 5}) == 15
    assert usage_tokens({"input_tokens": 3, "cache_read_input_tokens": 4, "output_tokens": 1}) == 8  # Anthropic's parts
    assert usage_tokens({"completion_tokens": 5}) is None and usage_tokens(None) is None


def test_provider_usage_anchors_the_reading_and_the_estimate_adds_what_came_after() -> None:
    async def main() -> Agent:
        agent = Agent(ScriptedModel([answer("Hello.", prompt_tokens=500)]), system="Be brief.")
        agent.followup(user("Hi"))
        await agent.when_idle()
        return agent

    agent = asyncio.run(main())
    meter = TokenMeter(agent.session)
    assert meter.reading() == 507 and meter.provider_based
    later = user("x" * 400)
    agent.session.append("user/message", later)
    assert meter.reading() == 507 + estimate_message(later)
    assert meter.estimate() == estimate_text("Be brief.") + sum(estimate_message(m) for m in agent.session.messages())
    agent.session.append("request/header", {"header": {"system": "Now longer.", "tools": [], "config": {}}, "reason": "change"})
    assert not meter.provider_based and meter.reading() == meter.estimate()  # the usage counted another header


def test_a_replacement_the_usage_counted_drops_it_and_one_after_it_adjusts() -> None:
    session = Session()
    first = user("q" * 800)
    session.append("user/message", first)
    reply = dshkit.create_assistant_message([{"type": "text", "text": "a"}], provider="p", model="m")
    session.append("assistant/message", {"message": reply, "usage": {"input_tokens": 300, "output_tokens": 2}})
    after = user("z" * 800)
    session.append("user/message", after)
    meter = TokenMeter(session)
    assert meter.reading() == 302 + estimate_message(after)
    session.replace(after.with_content("short"))
    assert meter.reading() == 302 + estimate_message(session.messages()[2]) and meter.provider_based
    session.replace(first.with_content("short"))
    assert not meter.provider_based and meter.reading() == sum(estimate_message(m) for m in session.messages())


def test_reopen_gives_the_same_reading(tmp_path: Path) -> None:
    path = tmp_path / "meter.jsonl"

    async def main() -> int:
        model = LoopModel(120)
        session = Session.create(path)
        agent = Agent(model, session=session, tools=[read_tool()], system="Read.", compaction=Compaction(context_window=8000))
        agent.followup(user("Read the pages."))
        await agent.when_idle()
        reading = agent.tokens
        session.close()
        return reading

    reading = asyncio.run(main())
    with Session.open(path, read_only=True) as session:
        meter = TokenMeter(session)
        assert meter.reading() == reading and meter.provider_based
        assert len(session.events) > 1000  # compactions happened: the reading survived them


def test_an_original_log_with_a_compaction_opens_and_continues(tmp_path: Path) -> None:
    path = SCENARIOS["compaction_and_inbox"]().write(tmp_path / "original.jsonl")

    async def main() -> Agent:
        session = Session.open(path)
        assert TokenMeter(session).reading() > 0
        model = ScriptedModel(["x" * 3000, "Ok.", "The user asked questions; a long answer came."])
        agent = Agent(model, session=session, compaction=Compaction(context_window=100_000, keep_recent_tokens=10))
        for text in ("Next?", "And?"):
            agent.followup(user(text))
            await agent.when_idle()
        assert await agent.compact() is not None
        session.close()
        return agent

    asyncio.run(main())
    with Session.open(path, read_only=True) as session:
        assert session.format == "dsh"
        summary = [event for event in session.events if event.type == "compaction/summary"][-1]
        assert summary.data["compaction_id"] and summary.data["shadowed_seqs"]
        assert check_events(session.events) == []
    text = path.read_text()
    assert '"shadowedSeqs"' in text and '"compactionId"' in text and "shadowed_seqs" not in text  # the original's names on disk


def test_log_show_and_chat_show_the_meter(tmp_path: Path) -> None:
    import io
    import os
    import subprocess
    import sys

    from dshkit.agent import AgentEvent
    from dshkit.agent._compaction.tokens import format_tokens, meter_label
    from dshkit.cli.chat import _Chat
    from dshkit.models.chat.model import OpenAICompatibleModel

    assert [format_tokens(n) for n in (950, 1000, 12_345, 128_000, 1_234_567)] == ["950", "1k", "12.3k", "128k", "1.2M"]
    assert meter_label(12_345, 128_000) == "[12.3k/128k]" and meter_label(5, None) == "[5]"
    path = tmp_path / "shown.jsonl"
    session = Session.create(path)
    session.append("user/message", user("hi"))
    reply = dshkit.create_assistant_message("hello", provider="p", model="m")
    event = session.append("assistant/message", {"message": reply, "usage": {"prompt_tokens": 12_000, "completion_tokens": 300}})

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    chat = _Chat(OpenAICompatibleModel("m", Provider("http://x")), session, path, None, io.StringIO(), Terminal(), err, context_window=128_000)
    chat._on_event(AgentEvent("message", 1, 1, reply, {"event_type": "assistant/message", "seq": event.seq}))
    assert "[tokens: 12000 in, 300 out] [12.3k/128k]" in err.getvalue()
    session.close()
    env = {**os.environ, "PYTHONPATH": DSHKIT_PATH}
    shown = subprocess.run([sys.executable, "-m", "dshkit", "log", "show", str(path)], capture_output=True, text=True, env=env)
    assert shown.returncode == 0 and shown.stdout.splitlines()[-1] == "next request: 12.3k tokens (12300, provider usage + estimate)"


def test_the_meter_mirrors_the_surface_of_every_original_log(tmp_path: Path) -> None:
    from tests.session.dsh.original_logs import user as original_user

    logs = {name: build() for name, build in SCENARIOS.items()}
    off_surface = SCENARIOS["text_and_reasoning"]()
    off_surface.event("user/message", original_user("logged, never sent"))  # no surfaceOp: off the surface
    logs["off_surface"] = off_surface
    for name, log in logs.items():
        with Session.open(log.write(tmp_path / f"{name}.jsonl"), read_only=True) as session:
            expected = [estimate_message(message) for message in session.messages()]
            assert TokenMeter(session).node_estimates() == expected, name
