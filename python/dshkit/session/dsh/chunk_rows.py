"""The original's packed chunk rows: one stored line standing for a run of delta chunk events.

`{"type": "text-chunks", "seq0": S, "time0": T, "data": {"turn", "step", "index", "dt", "texts"}}`
holds the `assistant/chunk` events S, S+1, ... whose chunks are `text-delta` blocks (likewise
`reasoning-chunks`, and `tool-call-chunks` with `id`, an optional uniform `name` and `args`).
Member k has time `T + sum(dt[:k])`. Rows are storage, never events: reading expands them,
writing packs runs of at least three whitelisted chunks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dshkit import FrozenDict, freeze

ROW_TYPES = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta", "tool-call-chunks": "tool-call-delta"}
_ROW_FOR_DELTA = {value: key for key, value in ROW_TYPES.items()}
MIN_RUN = 3
_TEXT_KEYS = frozenset(("turn", "step", "index", "dt", "texts"))
_CALL_KEYS = frozenset(("turn", "step", "index", "id", "dt", "args"))
_CALL_NAMED_KEYS = _CALL_KEYS | {"name"}


def _int(value: object) -> bool:
    return type(value) is int


def expand_row(row: Mapping[str, Any]) -> list[tuple[int, int, FrozenDict[Any]]]:
    """The (seq, time, data) of every event a packed row stands for; `ValueError` if malformed.

    The hot path of opening a log with many deltas: one `freeze` of a plain nested dict per
    member (the cheapest way to build the two frozen mappings each event needs).
    """
    tag = row["type"]
    if len(row) != 4 or "seq0" not in row or "time0" not in row or "data" not in row:
        raise ValueError(f"malformed {tag} row: its keys must be exactly type, seq0, time0, data")
    seq0, time, data = row["seq0"], row["time0"], row["data"]
    if type(seq0) is not int or seq0 < 0 or type(time) is not int or type(data) is not FrozenDict:
        raise ValueError(f"malformed {tag} row: seq0 and time0 must be ints and data an object")
    keys = set(data)
    if tag == "tool-call-chunks":
        if (keys != _CALL_KEYS and keys != _CALL_NAMED_KEYS) or type(data["id"]) is not str:
            raise ValueError(f"malformed {tag} row: data must be exactly turn, step, index, id, name?, dt, args")
        members = data["args"]
    else:
        if keys != _TEXT_KEYS:
            raise ValueError(f"malformed {tag} row: data must be exactly turn, step, index, dt, texts")
        members = data["texts"]
    turn, step, index, gaps = data["turn"], data["step"], data["index"], data["dt"]
    if type(turn) is not int or type(step) is not int or type(index) is not int:
        raise ValueError(f"malformed {tag} row: turn, step and index must be ints")
    if type(members) is not tuple or not members or not all(type(member) is str for member in members):
        raise ValueError(f"malformed {tag} row: its members must be a non-empty list of strings")
    if type(gaps) is not tuple or len(gaps) != len(members) - 1 or not all(type(gap) is int for gap in gaps):
        raise ValueError(f"malformed {tag} row: dt must hold {len(members) - 1} int gaps")
    delta = ROW_TYPES[tag]
    if tag == "tool-call-chunks":
        call_id = data["id"]
        if "name" in data:
            name = data["name"]
            chunks = [{"type": delta, "index": index, "id": call_id, "name": name, "argumentsDelta": m} for m in members]
        else:
            chunks = [{"type": delta, "index": index, "id": call_id, "argumentsDelta": m} for m in members]
    else:
        chunks = [{"type": delta, "index": index, "text": member} for member in members]
    out = [(seq0, time, freeze({"turn": turn, "step": step, "chunk": chunks[0]}))]
    for k in range(1, len(chunks)):
        time += gaps[k - 1]
        out.append((seq0 + k, time, freeze({"turn": turn, "step": step, "chunk": chunks[k]})))
    return out


def _delta_kind(event_type: str, data: Any) -> tuple[Any, ...] | None:
    """The run key of a packable chunk event (kind, turn, step, index, id, name), else None."""
    if event_type != "assistant/chunk" or not isinstance(data, Mapping) or set(data) != {"turn", "step", "chunk"}:
        return None
    chunk = data["chunk"]
    if not isinstance(chunk, Mapping) or not (_int(data["turn"]) and _int(data["step"]) and _int(chunk.get("index"))):
        return None
    kind = chunk.get("type")
    if kind in ("text-delta", "reasoning-delta"):
        if set(chunk) == {"type", "index", "text"} and type(chunk["text"]) is str:
            return (kind, data["turn"], data["step"], chunk["index"])
        return None
    if kind == "tool-call-delta" and type(chunk.get("id")) is str and type(chunk.get("argumentsDelta")) is str:
        keys = set(chunk)
        if keys == {"type", "index", "id", "argumentsDelta"}:
            return (kind, data["turn"], data["step"], chunk["index"], chunk["id"], False, None)
        if keys == {"type", "index", "id", "name", "argumentsDelta"} and type(chunk["name"]) is str:
            return (kind, data["turn"], data["step"], chunk["index"], chunk["id"], True, chunk["name"])
    return None


def _row(run: Sequence[tuple[int, int, Any]], key: tuple[Any, ...]) -> dict[str, Any]:
    kind, turn, step, index = key[:4]
    data: dict[str, Any] = {"turn": turn, "step": step, "index": index}
    if kind == "tool-call-delta":
        data["id"] = key[4]
        if key[5]:
            data["name"] = key[6]
    data["dt"] = [run[k][1] - run[k - 1][1] for k in range(1, len(run))]
    if kind == "tool-call-delta":
        data["args"] = [member[2]["chunk"]["argumentsDelta"] for member in run]
    else:
        data["texts"] = [member[2]["chunk"]["text"] for member in run]
    return {"type": _ROW_FOR_DELTA[kind], "seq0": run[0][0], "time0": run[0][1], "data": data}


def pack_runs(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replace each run of at least three packable chunk records by one packed row."""
    out: list[dict[str, Any]] = []
    run: list[tuple[int, int, Any]] = []
    run_records: list[dict[str, Any]] = []
    run_key: tuple[Any, ...] | None = None

    def flush() -> None:
        if run_key is not None and len(run) >= MIN_RUN:
            out.append(_row(run, run_key))
        else:
            out.extend(run_records)
        run.clear()
        run_records.clear()

    for record in records:
        key = _delta_kind(record["type"], record["data"]) if set(record) == {"type", "seq", "time", "data"} else None
        if key is None:
            flush()
            run_key = None
            out.append(record)
            continue
        if key != run_key or not run or record["seq"] != run[-1][0] + 1:
            flush()
            run_key = key
        run.append((record["seq"], record["time"], record["data"]))
        run_records.append(record)
    flush()
    return out
