"""Shared fixtures for the session tests: message builders and a log path for each store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import dshkit
from dshkit import Message
from dshkit.session import Event, Session


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
def build() -> type[Build]:
    return Build


@pytest.fixture(params=["jsonl", "sqlite"])
def log_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A path (not yet created) for a log in each store (the store contract itself is `test_store_contract.py`)."""
    return tmp_path / f"session.{request.param}"
