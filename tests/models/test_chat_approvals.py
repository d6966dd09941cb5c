"""`dshkit chat` asks at the terminal (y / n / always) before a call that needs approval runs."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

from dshkit.agent import Tool
from dshkit.cli.chat import _Chat
from dshkit.models import ScriptedModel
from dshkit.session import Session


class _Model(ScriptedModel):
    url = "scripted://"

    async def aclose(self) -> None:
        return None


def _calls(*calls: tuple[str, str]) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = [
        {"type": "tool_call_delta", "index": index, "id": call_id, "name": "rm", "arguments": arguments}
        for index, (call_id, arguments) in enumerate(calls)
    ]
    return chunks + [{"type": "finish", "reason": "tool_calls"}]


def _chat(tmp_path: Path, responses: list[Any], typed: str, ran: list[str]) -> tuple[Session, str, int]:
    def remove(arguments: Any, ctx: Any) -> str:
        ran.append(arguments["path"])
        return "removed"

    tool = Tool("rm", "Remove.", {"type": "object", "properties": {"path": {"type": "string"}}}, remove, approval="ask")
    session = Session.create(tmp_path / "chat.jsonl")
    err = io.StringIO()
    chat = _Chat(_Model(responses), session, tmp_path / "chat.jsonl", None, io.StringIO(typed), io.StringIO(), err, tools=[tool])
    code = asyncio.run(chat.run(resuming=False))
    return session, err.getvalue(), code


def test_the_call_is_shown_and_y_runs_it_while_other_words_ask_again(tmp_path: Path) -> None:
    ran: list[str] = []
    session, err, code = _chat(tmp_path, [_calls(("c1", '{"path": "build"}')), "Removed."], "clean up\nmaybe\ny\n", ran)
    assert code == 0
    assert ran == ["build"]
    assert '[approval] rm {"path": "build"}' in err
    assert err.count("allow? [y]es / [n]o / [a]lways: ") == 2  # "maybe" asked again
    assert [e.data["outcome"] for e in session.events if e.type == "approval/decided"] == ["allowed_once"]


def test_n_denies_and_always_remembers(tmp_path: Path) -> None:
    ran: list[str] = []
    responses = [_calls(("c1", '{"path": "a"}')), _calls(("c2", '{"path": "b"}')), _calls(("c3", '{"path": "c"}')), "done"]
    session, err, code = _chat(tmp_path, responses, "go\nn\nalways\n", ran)
    assert ran == ["b", "c"]  # c1 denied, c2 allowed always, c3 not asked
    assert [e.data["outcome"] for e in session.events if e.type == "approval/decided"] == ["rejected", "allowed_once"]
    assert [dict(e.data) for e in session.events if e.type == "approval/policy"] == [{"policy": "always", "tool": "rm"}]


def test_end_of_input_at_the_question_denies(tmp_path: Path) -> None:
    ran: list[str] = []
    session, err, code = _chat(tmp_path, [_calls(("c1", '{"path": "a"}')), "ok"], "go\n", ran)
    assert ran == []
    (decided,) = [e for e in session.events if e.type == "approval/decided"]
    assert decided.data["outcome"] == "rejected" and decided.data["reason"] == "no answer at the terminal"
