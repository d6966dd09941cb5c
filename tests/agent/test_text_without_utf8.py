"""Text with no UTF-8 form (a lone surrogate) reaching the log: replaced visibly, never a broken session.

A real directory holds a file whose name is not UTF-8; `os.listdir` decodes it with
surrogateescape, so the tool's result holds a lone surrogate. Every store must log the call's
result, and the session must take later turns, also after it is opened again.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import dshkit
from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session


def run_turn(agent: Agent, text: str) -> None:
    async def main() -> None:
        agent.followup(dshkit.create_user_message(text, source={"kind": "user"}))
        await agent.when_idle()

    asyncio.run(main())


def test_a_file_name_that_is_not_utf8_is_logged_with_a_replacement_character(log_place: Any, tmp_path: Path, kit: Any) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    os.close(os.open(os.fsencode(folder) + b"/report-\xff.txt", os.O_CREAT | os.O_WRONLY))  # a name in raw bytes
    listed = os.listdir(folder)
    assert listed == ["report-\udcff.txt"]
    listing = Tool("ls", "List the files.", {"type": "object"}, lambda arguments, ctx: " ".join(os.listdir(folder)))
    session = Session.create(log_place.location, session_id=log_place.session_id)
    model = ScriptedModel([kit.calls_response(("c1", "ls", "{}")), "One report."])
    run_turn(Agent(model, session=session, tools=[listing]), "What is there?")
    session.close()

    with Session.open(log_place.location, session_id=log_place.session_id) as session:
        ends = [event.data["reason"]["kind"] for event in session.events if event.type == "turn/end"]
        assert ends == ["completed"]
        (result,) = [event.data["message"] for event in session.events if event.type == "tool/result"]
        assert result.content[0]["content"][0]["text"] == "report-\ufffd.txt"  # visible, and valid UTF-8
        # The model was sent the same text the log holds.
        assert "report-\ufffd.txt" in str(model.requests[1].messages[-1].content)
        again = ScriptedModel([kit.calls_response(("c2", "ls", "{}")), "Still one."])
        run_turn(Agent(again, session=session, tools=[listing]), "And now?")
        ends = [event.data["reason"]["kind"] for event in session.events if event.type == "turn/end"]
        assert ends == ["completed", "completed"]
        assert session.messages()[-1].text == "Still one."
