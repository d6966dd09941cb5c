"""Shared fixtures for the session tests: message builders and a log path for each store."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import dshkit
from dshkit import Message
from dshkit._core import crc32c
from dshkit.session import Event, Session
from dshkit.session._log.checksums import SUFFIX_LENGTH, seal_line


def seal_any(text: str) -> bytes:
    """A JSON Lines line for any record text, even a broken one, whose checksum matches.

    A JSON object is sealed as the store seals it; other text gets the checksum suffix as if
    it ended in the object's closing brace, so it reads back as `text + "}"`: still broken,
    which is the point (damage whose checksum passes shows the decoder's own error).
    """
    if text.endswith("}"):
        return seal_line(text)
    return b'%s,"crc":"%08x"}\n' % (text.encode(), crc32c((text + "}").encode()))


def to_version_1(path: Path) -> None:
    """Rewrite a JSON Lines log in format version 1 (no checksums), as an older dshkit wrote it."""
    header, *lines = path.read_bytes().split(b"\n")
    header = header[:-SUFFIX_LENGTH].replace(b'"version":2', b'"version":1') + b"}"
    events = [line[:-SUFFIX_LENGTH] + b"}" for line in lines[:-1]]
    path.write_bytes(b"\n".join([header, *events, b""]))


class Build:
    """Builders for complete messages and the events of a turn (the agent's shapes)."""

    @staticmethod
    def user(text: str = "hello") -> Message:
        return dshkit.create_user_message(text, source={"kind": "user"})

    @staticmethod
    def context(text: str = "context") -> Message:
        return dshkit.create_user_message(text, source={"kind": "plugin", "plugin": "notes", "form": "snapshot"})

    @staticmethod
    def assistant(text: str = "ok", calls: Sequence[str] = ()) -> Message:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_call", "id": call, "name": "lookup", "arguments": '{"q": 1}'} for call in calls]
        return dshkit.create_assistant_message(content, provider="test", model="m1")

    @staticmethod
    def result(call_id: str, text: str = "done", *, is_error: bool = False) -> Message:
        return dshkit.create_tool_result_message(call_id, text, is_error=is_error)

    @staticmethod
    def tool_turn(session: Session, turn: int = 1, calls: Sequence[str] = ("c1",), *, finish: bool = True) -> list[Event]:
        """A whole turn: a prompt, a response calling tools, their results, a final answer."""
        out = [
            session.append("turn/start", {"turn": turn}),
            session.append("step/start", {"turn": turn, "step": 1}),
            session.append("user/message", Build.user(f"prompt {turn}")),
            session.append("request/header", {"header": {"system": "be brief", "tools": [], "config": {}}, "reason": "initial" if turn == 1 else "change"}),
            session.append("assistant/message", {"turn": turn, "step": 1, "message": Build.assistant("calling", calls), "usage": {"input_tokens": 10}}),
        ]
        for call in calls:
            call_event = session.append("tool/call", {"turn": turn, "step": 1, "call_id": call, "name": "lookup", "arguments": '{"q": 1}'})
            out += [
                call_event,
                session.append("tool/result", {"turn": turn, "step": 1, "message": Build.result(call)}, source_event_seqs=[call_event.seq]),
            ]
        if finish:
            out += [
                session.append("step/end", {"turn": turn, "step": 1}),
                session.append("step/start", {"turn": turn, "step": 2}),
                session.append("assistant/message", {"turn": turn, "step": 2, "message": Build.assistant("answer")}),
                session.append("step/end", {"turn": turn, "step": 2}),
                session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}}),
            ]
        return out


@pytest.fixture
def legacy_log(tmp_path: Path) -> Path:
    """A version 1 JSON Lines log (no checksums) holding five user messages m0..m4."""
    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:
        for n in range(5):
            session.append("user/message", Build.user(f"m{n}"))
    to_version_1(path)
    return path


@pytest.fixture
def build() -> type[Build]:
    return Build


@pytest.fixture(params=["jsonl", "sqlite"])
def log_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A path (not yet created) for a log in each store (the store contract itself is `test_store_contract.py`)."""
    return tmp_path / f"session.{request.param}"


@pytest.fixture
def fresh_database(postgres_url: str) -> Iterator[str]:
    """The URL of a new, empty database in the test cluster (dropped afterwards)."""
    import psycopg

    name = f"fresh_{dshkit.new_message_id().lower()}"
    admin_url = postgres_url.replace("/dshkit_test?", "/postgres?")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield postgres_url.replace("/dshkit_test?", f"/{name}?")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
