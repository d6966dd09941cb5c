"""Builders of logs in the original TypeScript harness's format, written from its format notes.

`OriginalLog` numbers records like the original's runtime (`seq` contiguous from 0, `time` in ms)
and writes them as plain JSONL or as checksummed Zstandard frames (one per `frame()` batch).
`reference_messages` is an independent fold of the raw records by the original's surface rules,
used as the expected value.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

T0 = 1783600629539


def user(text: str, *, source: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "source": source or {"kind": "user"}, "role": "user", "id": str(uuid.uuid4())}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": list(blocks),
        "source": {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"},
        "id": str(uuid.uuid4()),
    }


def tool_result(call_id: str, text: str, *, is_error: bool | None = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}]}
    if is_error is not None:
        block["isError"] = is_error
    return {"role": "user", "source": {"kind": "tool", "callId": call_id}, "content": [block], "id": str(uuid.uuid4())}


class OriginalLog:
    """Records of one original log, in order, split into frames (write batches)."""

    def __init__(self, *, session_id: str | None = None, **header: Any) -> None:
        self.header = {"type": "session", "version": 0, "id": session_id or str(uuid.uuid4()), "createdAt": T0}
        self.header.update({"cwd": "/work/project", "delegationDepth": 0, **header})
        self.records: list[dict[str, Any]] = []
        self.frames: list[int] = []  # record counts at frame boundaries
        self.seq = 0
        self.time = T0
        self.attachments: dict[str, bytes] = {}  # hex sha256 -> bytes, written beside the log

    def image(self, data: bytes, *, media_type: str = "image/png", name: str | None = None) -> dict[str, Any]:
        """An image block referring to `data` by content address, as the original writes it."""
        digest = hashlib.sha256(data).hexdigest()
        self.attachments[digest] = data
        reference: dict[str, Any] = {"attachmentId": f"sha256:{digest}", "mediaType": media_type, "width": 1, "height": 1, "bytes": len(data)}
        if name is not None:
            reference["name"] = name
        return {"type": "image", "attachment": reference}

    def write_attachments(self, home: Path) -> None:
        """The attachments' bytes as the original keeps them: `<home>/attachments/v1/objects/<2 hex>/<hex>`."""
        for digest, data in self.attachments.items():
            target = home / "attachments" / "v1" / "objects" / digest[:2] / digest
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    def event(self, event_type: str, data: Any, **envelope: Any) -> int:
        self.time += 7
        if event_type == "assistant/message" and "surfaceOp" in envelope:
            # the original's agent always cites the chunk seqs of a response, possibly none
            envelope = {"sourceEventSeqs": envelope.pop("sourceEventSeqs", []), **envelope}
        record = {"type": event_type, "seq": self.seq, "time": self.time, "data": data, **envelope}
        self.records.append(record)
        self.seq += 1
        return record["seq"]

    def packed(self, tag: str, turn: int, step: int, index: int, members: list[str], **call: Any) -> None:
        gaps = [3] * (len(members) - 1)
        data: dict[str, Any] = {"turn": turn, "step": step, "index": index}
        if tag == "tool-call-chunks":
            data.update(call)
            data["dt"], data["args"] = gaps, members
        else:
            data["dt"], data["texts"] = gaps, members
        self.time += 7
        self.records.append({"type": tag, "seq0": self.seq, "time0": self.time, "data": data})
        self.seq += len(members)
        self.time += sum(gaps)

    def frame(self) -> None:
        self.frames.append(len(self.records))

    def lines(self) -> list[str]:
        return [json.dumps(record, separators=(",", ":")) for record in self.records]

    def write(self, path: Path, *, home: Path | None = None) -> Path:
        """The log at `path`, its attachments below `home` (default: beside the log)."""
        self.write_attachments(path.parent if home is None else home)
        if path.name.endswith(".zstd"):
            import zstandard

            compressor = zstandard.ZstdCompressor(write_checksum=True)
            lines = self.lines()
            out = [compressor.compress((json.dumps(self.header) + "\n").encode())]
            bounds = [0, *[b for b in self.frames if 0 < b < len(lines)], len(lines)]
            for start, end in zip(bounds, bounds[1:]):
                if end > start:
                    out.append(compressor.compress(("\n".join(lines[start:end]) + "\n").encode()))
            path.write_bytes(b"".join(out))
        else:
            path.write_text("\n".join([json.dumps(self.header), *self.lines()]) + "\n")
        return path

    # -- expected values ------------------------------------------------------------------

    def expanded(self) -> list[dict[str, Any]]:
        """Every event the records stand for (packed rows expanded by hand)."""
        out = []
        for record in self.records:
            if "seq0" not in record:
                out.append(record)
                continue
            data = record["data"]
            time = record["time0"]
            members = data.get("texts", data.get("args"))
            for k, member in enumerate(members):
                time += data["dt"][k - 1] if k else 0
                if record["type"] == "tool-call-chunks":
                    chunk = {"type": "tool-call-delta", "index": data["index"], "id": data["id"]}
                    if "name" in data:
                        chunk["name"] = data["name"]
                    chunk["argumentsDelta"] = member
                else:
                    kind = "text-delta" if record["type"] == "text-chunks" else "reasoning-delta"
                    chunk = {"type": kind, "index": data["index"], "text": member}
                out.append({"type": "assistant/chunk", "seq": record["seq0"] + k, "time": time,
                            "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk}})
        return out


def reference_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The original's surface fold: nodes are seqs, a replace names the first and last node seq."""
    nodes: list[int] = []
    for event in events:
        if event["type"] not in ("user/message", "assistant/message", "tool/result") or "surfaceOp" not in event:
            continue
        op = event["surfaceOp"]
        if op == "append":
            nodes.append(event["seq"])
        else:
            start, end = nodes.index(op["start"]), nodes.index(op["end"])
            nodes[start : end + 1] = [event["seq"]]
    out = []
    for seq in nodes:
        event = events[seq]
        message = event["data"] if event["type"] == "user/message" else event["data"]["message"]
        if event["type"] == "assistant/message" and not message["content"]:
            continue
        out.append(message)
    return out


def write_sqlite_db(path: Path, header: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """Add the session of `header` and `records` to the original's SQLite database at `path` (schema 17),
    as its runtime stores rows: `data` zstd-compressed from 300 characters, packed chunk rows as they are."""
    import zstandard

    from dshkit.session.dsh.sqlite_store import encode_source_seqs

    connection = sqlite3.connect(path)
    connection.executescript(
        """CREATE TABLE IF NOT EXISTS persistence_state (singleton INTEGER PRIMARY KEY, store_id TEXT NOT NULL) STRICT;
        CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, version INTEGER NOT NULL, created_at INTEGER NOT NULL, cwd TEXT,
          parent_session TEXT, seed_length INTEGER, origin TEXT, delegation_depth INTEGER, agent_preset TEXT,
          incarnation TEXT NOT NULL, revision INTEGER NOT NULL) STRICT;
        CREATE TABLE IF NOT EXISTS events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL,
          data ANY NOT NULL, source_event_seqs ANY, surface_op TEXT, ignorable INTEGER, PRIMARY KEY (session_id, seq)) STRICT;
        PRAGMA user_version = 17;"""
    )
    connection.execute("INSERT INTO sessions VALUES (?, 0, ?, ?, NULL, NULL, NULL, 0, NULL, 'inc', 1)",
                       (header["id"], header["createdAt"], header.get("cwd")))
    for record in records:
        text = json.dumps(record["data"])
        data = zstandard.ZstdCompressor(level=3).compress(text.encode()) if len(text) >= 300 else text
        if "seq0" in record:
            row = (header["id"], record["seq0"], record["type"], record["time0"], data, None, None, 0)
        else:
            sources = encode_source_seqs(record["sourceEventSeqs"]) if "sourceEventSeqs" in record else None
            op = json.dumps(record["surfaceOp"]) if "surfaceOp" in record else None
            row = (header["id"], record["seq"], record["type"], record["time"], data, sources, op, 1 if record.get("ignorable") else None)
        connection.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
    connection.commit()
    connection.close()
