"""Shared helpers for the agent tests: real sessions, real asyncio, ScriptedModel."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import dshkit
from dshkit.models import ScriptedModel


def user(text: str) -> dshkit.Message:
    """A new person-typed user message."""
    return dshkit.create_user_message(text, source={"kind": "user"})


def context(text: str, plugin: str = "test") -> dshkit.Message:
    """A new plugin-produced context message."""
    return dshkit.create_user_message(text, source={"kind": "plugin", "plugin": plugin})


def tool_call(index: int, call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    """One complete tool-call delta."""
    return {"type": "tool_call_delta", "index": index, "id": call_id, "name": name, "arguments": arguments}


def calls_response(*calls: tuple[str, str, str], text: str | None = None) -> list[dict[str, Any]]:
    """A scripted response asking for tool calls ``(call_id, name, arguments)``."""
    chunks: list[dict[str, Any]] = [] if text is None else [{"type": "text_delta", "text": text}]
    chunks += [tool_call(index, call_id, name, arguments) for index, (call_id, name, arguments) in enumerate(calls)]
    chunks.append({"type": "finish", "reason": "tool_calls"})
    return chunks


class RecordingModel(ScriptedModel):
    """A ScriptedModel that also notes how many events the log held at each call."""

    def __init__(self, responses: list[Any], **kwargs: Any) -> None:
        super().__init__(responses, **kwargs)
        self.session: Any = None  # set by the test once the agent has its session
        self.prefix_lengths: list[int] = []

    def stream(self, request: Any, cancel: Any = None) -> Any:
        self.prefix_lengths.append(len(self.session.events))
        return super().stream(request, cancel)


class Kit:
    """Helpers handed to tests through the `kit` fixture."""

    user = staticmethod(user)
    context = staticmethod(context)
    tool_call = staticmethod(tool_call)
    calls_response = staticmethod(calls_response)
    RecordingModel = RecordingModel

    @staticmethod
    def types(session: Any, *, skip: tuple[str, ...] = ("assistant/chunk",)) -> list[str]:
        """The session's event types in order (chunks left out unless asked)."""
        return [event.type for event in session.events if event.type not in skip]

    @staticmethod
    def of_type(session: Any, event_type: str) -> list[Any]:
        return [event for event in session.events if event.type == event_type]

    @staticmethod
    def turn_ends(session: Any) -> list[Any]:
        return [event.data["reason"] for event in session.events if event.type == "turn/end"]

    @staticmethod
    def texts(messages: Any) -> list[str]:
        return [message.text for message in messages]

    @staticmethod
    def run_followup(agent: Any, message: dshkit.Message) -> None:
        """On a fresh event loop: send `message` as a follow-up and wait until the agent is idle."""

        async def main() -> None:
            agent.followup(message)
            await agent.when_idle()

        asyncio.run(main())


@pytest.fixture
def kit() -> type[Kit]:
    return Kit


@pytest.fixture
def user_message() -> Callable[[str], dshkit.Message]:
    return user


class LogPlace(NamedTuple):
    """Where a test's log lives: a file path, or a PostgreSQL URL with the session's id."""

    location: str
    session_id: str


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def log_place(request: pytest.FixtureRequest, tmp_path: Path) -> LogPlace:
    """A log not yet created, in each store that ships (PostgreSQL: a private server)."""
    session_id = dshkit.new_message_id()
    if request.param == "postgres":
        return LogPlace(request.getfixturevalue("postgres_url"), session_id)
    return LogPlace(str(tmp_path / f"session.{request.param}"), session_id)
