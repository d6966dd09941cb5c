"""An ask and its decision are durable before the call waits or runs, in every store.

A real child process asks (and, in the second case, approves and starts the tool) and is killed
with SIGKILL; the log, read back in this process, must hold what the child acknowledged. The
default durability holds PostgreSQL appends in memory until a durability point: before, an ask
lived only there while the call waited, and an approved call ran with neither ask nor decision
stored.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from support import DSHKIT_PATH

from dshkit import create_user_message
from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from dshkit import create_user_message
    from dshkit.agent import Agent, Tool
    from dshkit.models import ScriptedModel
    from dshkit.session import Session

    location, session_id, marker, approve = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4] == "approve"

    def remove(arguments, ctx):
        marker.write_text("running")
        time.sleep(120)  # killed here, inside the approved call's body

    RM = Tool("rm", "Remove a file.", {"type": "object"}, remove, approval="ask")
    CALL = [
        {"type": "tool_call_delta", "index": 0, "id": "c1", "name": "rm", "arguments": '{"path": "old.log"}'},
        {"type": "finish", "reason": "tool_calls"},
    ]

    async def main():
        session = Session.create(location, session_id=session_id)  # the default durability
        agent = Agent(ScriptedModel([CALL]), session=session, tools=[RM])
        agent.followup(create_user_message("clean up", source={"kind": "user"}))
        while not agent.pending_approvals():
            await asyncio.sleep(0.01)
        if approve:
            agent.approve("c1")
        else:
            print("asked", flush=True)
        await asyncio.sleep(120)  # waits for a person: killed here

    asyncio.run(main())
    """
)


def run_and_kill(place: Any, marker: Path, approve: bool) -> None:
    """Start the child, wait until it asked (or its approved call runs), then SIGKILL it."""
    env = {**os.environ, "PYTHONPATH": DSHKIT_PATH}
    argv = [sys.executable, "-c", CHILD, place.location, place.session_id, str(marker), "approve" if approve else "wait"]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None
        if approve:
            while not marker.exists() and child.poll() is None:
                time.sleep(0.01)
            assert marker.exists(), "the approved call never started"
        else:
            assert child.stdout.readline() == "asked\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL


def approval_events(place: Any) -> list[tuple[str, str]]:
    with Session.open(place.location, session_id=place.session_id, read_only=True) as session:
        return [
            (event.type, event.data.get("outcome", ""))
            for event in session.events
            if event.type in ("approval/asked", "approval/decided", "turn/end")
        ]


@pytest.mark.timeout(120)
def test_an_ask_is_stored_before_the_call_waits_and_outlives_a_kill(log_place: Any, tmp_path: Path) -> None:
    marker = tmp_path / "removed"
    run_and_kill(log_place, marker, approve=False)
    assert approval_events(log_place) == [("approval/asked", "")]  # no turn/end: the turn waits, not crashed

    ran: list[str] = []
    rm = Tool("rm", "Remove a file.", {"type": "object"}, lambda arguments, ctx: ran.append(ctx.call_id) or "removed", approval="ask")
    with Session.open(log_place.location, session_id=log_place.session_id) as session:
        agent = Agent(ScriptedModel(["Done."]), session=session, tools=[rm])
        assert [pending.call_id for pending in agent.pending_approvals()] == ["c1"]

        async def approve() -> None:
            agent.approve("c1")
            await agent.when_idle()

        asyncio.run(approve())
        assert ran == ["c1"] and session.messages()[-1].text == "Done."
    assert approval_events(log_place) == [("approval/asked", ""), ("approval/decided", "allowed_once"), ("turn/end", "")]


@pytest.mark.timeout(120)
def test_an_ask_and_its_decision_are_stored_before_the_approved_call_runs(log_place: Any, tmp_path: Path) -> None:
    marker = tmp_path / "removed"
    run_and_kill(log_place, marker, approve=True)
    assert approval_events(log_place) == [("approval/asked", ""), ("approval/decided", "allowed_once")]
    with Session.open(log_place.location, session_id=log_place.session_id) as session:  # repaired: its outcome is unknown
        (result,) = [event.data["message"] for event in session.events if event.type == "tool/result"]
        assert result.content[0]["is_error"] is True
