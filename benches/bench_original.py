"""Opening a 100,000-event log of the original TypeScript harness against the same conversation
in dshkit's own format (the log converted by `convert_log`), both read and folded by `Session.open`
plus `messages()`.

Workload: per turn 20 events (turn and step boundaries, a prompt, a `session/title`, eight text
deltas that the original stores as one packed `text-chunks` row, an assistant message with a tool
call, `tool/call`, `tool/result`, a final answer), 5,000 turns, written as the original writes it:
plain `session.jsonl`, and `session.jsonl.zstd` (checksummed frames of 4,096 lines).

The targets read each original row's `paired_ratio_vs_dshkit_jsonl`: the row and the dshkit row
opened back to back in each of `PAIRED_ROUNDS` rounds (`paired.py`), the median of the rounds'
ratios. Rows timed a minute apart on this shared machine swung by a third from one run to the next.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from dshkit.session import Session, convert_log
from paired import paired_ratio

BIG = 100_000
EVENTS_PER_TURN = 20
T0 = 1_783_600_629_539
PAIRED_ROUNDS = 9

TARGETS = [
    {
        "name": "open + derive a 100,000-event original log (plain JSONL) <= 1.5x the same log in dshkit's format",
        "group": "session-open-original-100k",
        "row": "original_jsonl",
        "extra_info": "paired_ratio_vs_dshkit_jsonl",
        "max_value": 1.5,
    },
    {
        "name": "open + derive a 100,000-event original log (zstd frames) <= 1.5x the same log in dshkit's format",
        "group": "session-open-original-100k",
        "row": "original_zstd",
        "extra_info": "paired_ratio_vs_dshkit_jsonl",
        "max_value": 1.5,
    },
]


def original_records(turns: int) -> list[dict]:
    """The original's records (packed rows included) of `turns` agent turns."""
    records: list[dict] = []
    seq, time = 0, T0
    model = {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"}

    def event(event_type: str, data: object, **envelope: object) -> int:
        nonlocal seq, time
        time += 5
        records.append({"type": event_type, "seq": seq, "time": time, "data": data, **envelope})
        seq += 1
        return seq - 1

    for turn in range(1, turns + 1):
        event("turn/start", {"turn": turn})
        event("step/start", {"turn": turn, "step": 1})
        prompt = {"content": [{"type": "text", "text": f"Please look up item {turn} and summarise it."}],
                  "source": {"kind": "user"}, "role": "user", "id": str(uuid.uuid4())}
        prompt_seq = event("user/message", prompt, surfaceOp="append")
        event("session/title", {"title": f"item {turn}", "messageSeqs": [prompt_seq], "source": {"kind": "fallback"}})
        if turn == 1:
            records.pop()
            seq -= 1
            event("request/header", {"header": {"config": {"provider": "deepseek-official", "model": "deepseek-v4-flash",
                                                           "maxTokens": 4096}, "system": "Be brief."}, "reason": "initial"})
        texts = [f"part {k} " for k in range(8)]
        records.append({"type": "text-chunks", "seq0": seq, "time0": time + 1,
                        "data": {"turn": turn, "step": 1, "index": 0, "dt": [1] * 7, "texts": texts}})
        chunk_seqs = list(range(seq, seq + 8))
        seq, time = seq + 8, time + 8
        call_id = f"call_{turn}"
        arguments = json.dumps({"item": turn})
        reply = {"role": "assistant", "content": [{"type": "text", "text": "".join(texts)},
                                                  {"type": "tool-call", "id": call_id, "name": "lookup", "arguments": arguments}],
                 "source": model, "id": str(uuid.uuid4())}
        event("assistant/message", {"turn": turn, "step": 1, "message": reply, "usage": {"inputTokens": 900, "outputTokens": 40}},
              sourceEventSeqs=chunk_seqs, surfaceOp="append")
        call_seq = event("tool/call", {"turn": turn, "step": 1, "callId": call_id, "name": "lookup", "arguments": arguments})
        result = {"role": "user", "source": {"kind": "tool", "callId": call_id}, "id": str(uuid.uuid4()),
                  "content": [{"type": "tool-result", "toolCallId": call_id, "isError": False,
                               "content": [{"type": "text", "text": f"item {turn}: blue, 12 in stock"}]}]}
        event("tool/result", {"turn": turn, "step": 1, "message": result}, sourceEventSeqs=[call_seq], surfaceOp="append")
        event("step/end", {"turn": turn, "step": 1})
        event("step/start", {"turn": turn, "step": 2})
        answer = {"role": "assistant", "content": [{"type": "text", "text": f"Item {turn} is blue."}], "source": model, "id": str(uuid.uuid4())}
        event("assistant/message", {"turn": turn, "step": 2, "message": answer}, sourceEventSeqs=[], surfaceOp="append")
        event("step/end", {"turn": turn, "step": 2})
        event("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return records


@pytest.fixture(scope="session")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("original-logs")
    header = {"type": "session", "version": 0, "id": str(uuid.uuid4()), "createdAt": T0, "cwd": "/work", "delegationDepth": 0}
    lines = [json.dumps(header), *(json.dumps(record, separators=(",", ":")) for record in original_records(BIG // EVENTS_PER_TURN))]
    plain = root / "session.jsonl"
    plain.write_text("\n".join(lines) + "\n")
    convert_log(plain, root / "session.jsonl.zstd", format="dsh")
    convert_log(plain, root / "dshkit.jsonl", format="dshkit")
    return {"original_jsonl": plain, "original_zstd": root / "session.jsonl.zstd", "dshkit_jsonl": root / "dshkit.jsonl"}


def open_and_derive(path: Path) -> tuple[int, int]:
    with Session.open(path, read_only=True) as session:
        return len(session.events), len(session.messages())


@pytest.mark.benchmark(group="session-open-original-100k")
@pytest.mark.parametrize("row", ["dshkit_jsonl", "original_jsonl", "original_zstd"])
def test_open_original(benchmark, logs: dict[str, Path], row: str) -> None:
    pytest.importorskip("zstandard")
    events, messages = benchmark.pedantic(open_and_derive, (logs[row],), rounds=5, warmup_rounds=1)
    assert events == BIG
    benchmark.extra_info["messages"] = messages
    benchmark.extra_info["bytes"] = logs[row].stat().st_size
    if row != "dshkit_jsonl":
        ratio = paired_ratio(open_and_derive, logs[row], open_and_derive, logs["dshkit_jsonl"], rounds=PAIRED_ROUNDS, best_of=1)
        benchmark.extra_info["paired_ratio_vs_dshkit_jsonl"] = round(ratio, 3)
