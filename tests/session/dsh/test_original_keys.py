"""Every key dshkit writes in the original harness's format is one the original reads.

The table below is transcribed from /work/shared/notes/original-log-format.md (§2.2 header,
§2.3 event lines, §2.4 packed rows, §2.5 event data, §2.6 the compaction example, §2.8 blocks
and sources) and, for the compaction records the notes only sketch, from the original's own
declarations (`packages/compaction/compaction/src/types.ts`, `checkpoint.ts`). A log written by a
dshkit agent that calls tools, prunes and compacts (automatically, on demand, and by hand with
`Session.compact`) must use no other key, and must pass the original's checkpoint check: each
compaction summary names, as `compactionId`, the compaction it belongs to.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dshkit
from dshkit.agent import Agent, Compaction, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session
from dshkit.session.compactions import DSHKIT_EXTENSION_KEYS, read_compactions
from dshkit.session.dsh.vocabulary import FINISH_REASON, camel_key

HEADER_KEYS = {"type", "version", "id", "createdAt", "cwd", "parentSession", "seedLength", "origin", "delegationDepth", "agentPreset"}
LINE_KEYS = {"type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable"}
ROW_KEYS = {"type", "seq0", "time0", "data"}
ROW_DATA_KEYS = {"turn", "step", "index", "dt", "texts", "id", "name", "args"}
SURFACE_OP_KEYS = {"op", "start", "end"}
USAGE_KEYS = {"inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "reasoningTokens"}
MESSAGE_KEYS = {"content", "source", "role", "id"}
SOURCE_KEYS = {
    "user": {"kind"},
    "model": {"kind", "provider", "model", "replayState"},
    "tool": {"kind", "callId"},
    "plugin": {"kind", "plugin", "compactionId", "sourceCommandId"},
}
BLOCK_KEYS = {
    "text": {"type", "text"},
    "reasoning": {"type", "text"},
    "tool-call": {"type", "id", "name", "arguments"},
    "tool-result": {"type", "toolCallId", "isError", "content"},
}
RANGE_KEYS = {"start", "end"}
# dshkit's own facts, which the original ignores (each named once, where dshkit defines it).
EXTENSIONS = {camel_key(key) for key in DSHKIT_EXTENSION_KEYS}
DATA_KEYS: dict[str, set[str]] = {
    "turn/start": {"turn"},
    "turn/end": {"turn", "reason"},
    "step/start": {"turn", "step"},
    "step/end": {"turn", "step"},
    "assistant/chunk": {"turn", "step", "chunk"},
    "assistant/message": {"turn", "step", "message", "usage", "interrupted"} | set(FINISH_REASON),
    "tool/call": {"turn", "step", "callId", "name", "arguments"},
    "tool/result": {"turn", "step", "message", "error", "meta"},
    "request/header": {"header", "reason"},
    "agent/inbox/spliced": {"target", "start", "removedCount", "inserted", "outcome"},
    "compaction/start": {"compactionId", "sourceCommandId", "turn"} | EXTENSIONS,
    "compaction/summary": {
        "compactionId", "sourceCommandId", "summary", "shadowedRange", "shadowedSeqs", "shadowedTokenCount",
        "provider", "model", "maxTokens", "usage", "rawOutput", "llmStreamCall",
    } | EXTENSIONS,
    "compaction/end": {"compactionId", "sourceCommandId", "turn", "error"},
    "compaction/prune": {"shadowedRange", "shadowedSeqs", "shadowedTokenCount"} | EXTENSIONS,
}
HEADER_DATA_KEYS = {"config", "adapterDefaults", "system", "tools"}
REASON_KEYS = {"kind", "reason", "error"}


def user(text: str) -> dshkit.Message:
    return dshkit.create_user_message(text, source={"kind": "user"})


def calls(*names: str) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = [
        {"type": "tool_call_delta", "index": index, "id": f"c{index}", "name": name, "arguments": "{}"} for index, name in enumerate(names)
    ]
    return [*chunks, {"type": "finish", "reason": "tool_calls"}]


def agent_written_log(path: Path) -> None:
    """A dshkit agent's run in the original's format: tools, a prune, an automatic, an on-demand and a hand-made compaction."""

    async def main() -> None:
        session = Session.create(path, format="dsh")
        read = Tool("read", "read a page", {"type": "object"}, lambda arguments, ctx: "p" * 3000)
        model = ScriptedModel([calls("read"), "a" * 3000, "b" * 3000, "Part one: a page was read.", "The user asked to read a page; it was read.", "Later.", "c" * 600, "All turns, in short."])
        # The window is small: the automatic summary is written in two parts (two summarizer calls).
        settings = Compaction(context_window=3000, threshold=0.5, keep_recent_tokens=100, prune_over_tokens=200)
        agent = Agent(model, session=session, tools=[read], compaction=settings)
        for text in ("Read the page.", "Next.", "And then?", "More?"):
            agent.followup(user(text))
            await agent.when_idle()
        assert await agent.compact() is not None
        messages = session.messages()
        session.compact(messages[0].id, messages[1].id, dshkit.create_user_message("By hand.", source={"kind": "plugin", "plugin": "compact", "compaction_id": dshkit.new_message_id()}))
        session.close()

    asyncio.run(main())


def original_lines(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return lines[0], lines[1:]


def key_problems(record: dict[str, Any]) -> Iterator[str]:
    """Each key of one event line that the notes do not name, as `seq type: where key`."""
    where = f"#{record.get('seq', record.get('seq0'))} {record['type']}"
    if "seq0" in record:
        yield from (f"{where}: row {key}" for key in set(record) - ROW_KEYS)
        yield from (f"{where}: row data {key}" for key in set(record["data"]) - ROW_DATA_KEYS)
        return
    yield from (f"{where}: line {key}" for key in set(record) - LINE_KEYS)
    if isinstance(record.get("surfaceOp"), dict):
        yield from (f"{where}: surfaceOp {key}" for key in set(record["surfaceOp"]) - SURFACE_OP_KEYS)
    data, event_type = record["data"], record["type"]
    if event_type == "user/message":
        yield from message_problems(where, data)
        return
    yield from (f"{where}: data {key}" for key in set(data) - DATA_KEYS.get(event_type, set()))
    yield from message_problems(where, data["message"]) if "message" in data else ()
    for message in data.get("inserted", ()):
        yield from message_problems(where, message)
    if isinstance(data.get("usage"), dict):
        yield from (f"{where}: usage {key}" for key in set(data["usage"]) - USAGE_KEYS)
    if isinstance(data.get("reason"), dict):
        yield from (f"{where}: reason {key}" for key in set(data["reason"]) - REASON_KEYS)
    if event_type == "request/header":
        yield from (f"{where}: header {key}" for key in set(data["header"]) - HEADER_DATA_KEYS)
    if "shadowedRange" in data:
        yield from (f"{where}: shadowedRange {key}" for key in set(data["shadowedRange"]) - RANGE_KEYS)
    for block in data.get("summary", ()):
        yield from (f"{where}: summary block {key}" for key in set(block) - BLOCK_KEYS.get(block["type"], set()))


def message_problems(where: str, message: dict[str, Any]) -> Iterator[str]:
    yield from (f"{where}: message {key}" for key in set(message) - MESSAGE_KEYS)
    source = message["source"]
    yield from (f"{where}: source {key}" for key in set(source) - SOURCE_KEYS.get(source["kind"], set()))
    for block in message["content"]:
        yield from (f"{where}: block {key}" for key in set(block) - BLOCK_KEYS.get(block["type"], set()))
        for inner in block.get("content", ()) if block["type"] == "tool-result" else ():
            yield from (f"{where}: result block {key}" for key in set(inner) - BLOCK_KEYS.get(inner["type"], set()))


def test_every_key_dshkit_writes_in_the_original_format_is_in_the_notes(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    agent_written_log(path)
    header, records = original_lines(path)
    assert set(header) <= HEADER_KEYS
    assert {record["type"] for record in records} >= {"compaction/prune", "compaction/summary", "tool/call", "request/header"}
    assert sum(record["type"] == "compaction/summary" for record in records) == 2  # automatic and on demand
    assert [problem for record in records for problem in key_problems(record)] == []


def test_each_compaction_summary_names_its_compaction_as_the_original_checks_it(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    agent_written_log(path)
    _, records = original_lines(path)
    open_id: str | None = None
    checked = 0
    for record in records:
        data = record["data"]
        if record["type"] == "compaction/start":
            assert open_id is None and isinstance(data["compactionId"], str) and data["compactionId"]
            open_id = data["compactionId"]
        elif record["type"] in ("compaction/summary", "compaction/end"):
            assert data["compactionId"] == open_id
            open_id = None if record["type"] == "compaction/end" else open_id
        elif record["type"] == "user/message" and data["source"].get("plugin") == "compact" and record.get("surfaceOp") != "append":
            assert data["source"].get("compactionId") == open_id and "compaction_id" not in data["source"]
            checked += 1
    assert checked == 3  # automatic, on demand, by hand
    # Read back, the summary's source names its compaction in dshkit's words, and the log reads as three compactions.
    with Session.open(path, read_only=True) as session:
        compactions = read_compactions(session.events)
        assert [facts.error for facts in compactions] == [None, None, None]
        for facts in compactions:
            summary = session.events[facts.message_seq].message
            assert summary.source["compaction_id"] == facts.compaction_id and "compactionId" not in summary.source
