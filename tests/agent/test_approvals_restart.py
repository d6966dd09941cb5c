"""Durable approvals across processes: one process asks and dies, another sees the ask and continues.

Real subprocesses on a real log file: the asking process is killed (SIGKILL) while it waits, so
nothing of it survives but the log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support import DSHKIT_PATH

from dshkit.session import Session

PYTHON_PATH = DSHKIT_PATH

COMMON = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from dshkit import create_user_message
    from dshkit.agent import Agent, Tool
    from dshkit.models import ScriptedModel
    from dshkit.session import Session

    log, marker = Path(sys.argv[1]), Path(sys.argv[2])

    def remove(arguments, ctx):
        marker.write_text(arguments["path"])
        return "removed " + arguments["path"]

    def listing(arguments, ctx):
        return "a.txt b.txt"

    TOOLS = [
        Tool("rm", "Remove a file.", {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
             remove, approval="ask"),
        Tool("ls", "List files.", {"type": "object"}, listing),
    ]

    # The one response both asking scripts stream: rm (asks) and ls (needs no approval).
    CALLS = [
        {"type": "tool_call_delta", "index": 0, "id": "c1", "name": "rm", "arguments": '{"path": "old.log"}'},
        {"type": "tool_call_delta", "index": 1, "id": "c2", "name": "ls", "arguments": "{}"},
        {"type": "finish", "reason": "tool_calls"},
    ]
    """
)

ASKER = COMMON + textwrap.dedent(
    """
    async def main():
        session = Session.create(log)
        agent = Agent(ScriptedModel([CALLS]), session=session, tools=TOOLS)
        agent.followup(create_user_message("clean up", source={"kind": "user"}))
        while not agent.pending_approvals() or not [e for e in session.events if e.type == "tool/result"]:
            await asyncio.sleep(0.01)
        print(json.dumps({"status": agent.status}), flush=True)
        await asyncio.sleep(30)  # waits for a person: killed here

    asyncio.run(main())
    """
)

DECIDER = COMMON + textwrap.dedent(
    """
    decision = sys.argv[3]

    async def main():
        session = Session.open(log)
        agent = Agent(ScriptedModel(["Done."]), session=session, tools=TOOLS)
        pending = [(p.call_id, p.tool, p.arguments) for p in agent.pending_approvals()]
        status = agent.status
        if decision == "approve":
            agent.approve("c1")
        elif decision == "deny":
            agent.deny("c1", "keep the logs")
        else:
            agent.cancel("user")
        await agent.when_idle()
        session.close()
        print(json.dumps({"pending": pending, "status": status, "after": agent.status}), flush=True)

    asyncio.run(main())
    """
)


def run_child(script: str, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": PYTHON_PATH}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def ask_then_kill(log: Path, marker: Path) -> None:
    env = {**os.environ, "PYTHONPATH": PYTHON_PATH}
    child = subprocess.Popen([sys.executable, "-c", ASKER, str(log), str(marker)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert json.loads(line) == {"status": "awaiting_approval"}
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()


def types(log: Path) -> list[str]:
    with Session.open(log, read_only=True) as session:
        return [e.type for e in session.events if e.type != "assistant/chunk"]


@pytest.mark.timeout(120)
def test_an_ask_survives_the_process_and_an_approval_in_another_continues_the_turn(tmp_path: Path) -> None:
    log, marker = tmp_path / "chat.jsonl", tmp_path / "removed"
    ask_then_kill(log, marker)
    assert not marker.exists()
    report = run_child(DECIDER, str(log), str(marker), "approve")
    assert report == {"pending": [["c1", "rm", '{"path": "old.log"}']], "status": "awaiting_approval", "after": "idle"}
    assert marker.read_text() == "old.log"  # the approved call ran in the second process
    with Session.open(log, read_only=True) as session:
        results = {e.data["message"].source["call_id"]: e for e in session.events if e.type == "tool/result"}
        assert sorted(results) == ["c1", "c2"]
        assert "error" not in results["c1"].data
        assert results["c2"].data["message"].content[0]["content"][0]["text"] == "a.txt b.txt"  # logged by the first process
        assert results["c1"].data["message"].content[0]["content"][0]["text"] == "removed old.log"
        ends = [e.data["reason"] for e in session.events if e.type == "turn/end"]
        assert ends == [{"kind": "completed"}]  # the one turn, continued: never repaired as interrupted
        assert session.messages()[-1].text == "Done."
    kinds = types(log)
    assert kinds.count("turn/start") == 1 and kinds.count("approval/decided") == 1


@pytest.mark.timeout(120)
def test_a_denial_after_a_restart_answers_the_call_with_the_reason(tmp_path: Path) -> None:
    log, marker = tmp_path / "chat.jsonl", tmp_path / "removed"
    ask_then_kill(log, marker)
    run_child(DECIDER, str(log), str(marker), "deny")
    assert not marker.exists()
    with Session.open(log, read_only=True) as session:
        (denied,) = [e for e in session.events if e.type == "tool/result" and e.data["message"].source["call_id"] == "c1"]
        assert "keep the logs" in denied.data["message"].content[0]["content"][0]["text"]


@pytest.mark.timeout(120)
def test_cancel_after_a_restart_gives_the_asked_call_an_error_result(tmp_path: Path) -> None:
    log, marker = tmp_path / "chat.jsonl", tmp_path / "removed"
    ask_then_kill(log, marker)
    report = run_child(DECIDER, str(log), str(marker), "cancel")
    assert report["after"] == "idle"
    assert not marker.exists()
    with Session.open(log, read_only=True) as session:
        results = [e for e in session.events if e.type == "tool/result"]
        assert [e.data["message"].source["call_id"] for e in results] == ["c2", "c1"]  # c2's result: from the first process
        assert results[1].data["message"].content[0]["is_error"] is True
        decided = [e.data["outcome"] for e in session.events if e.type == "approval/decided"]
        assert decided == ["cancelled"]
        assert [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"] == ["aborted"]


GRACEFUL = COMMON + textwrap.dedent(
    """
    async def main():
        session = Session.create(log)
        agent = Agent(ScriptedModel([CALLS]), session=session, tools=TOOLS)
        agent.followup(create_user_message("clean up", source={"kind": "user"}))
        while not agent.pending_approvals() or not [e for e in session.events if e.type == "tool/result"]:
            await asyncio.sleep(0.01)
        # returning ends asyncio.run, which cancels the agent's task: a graceful shutdown

    asyncio.run(main())
    print(json.dumps({"ok": True}))
    """
)


@pytest.mark.timeout(120)
def test_an_ask_also_survives_a_graceful_shutdown_of_the_process(tmp_path: Path) -> None:
    log, marker = tmp_path / "chat.jsonl", tmp_path / "removed"
    assert run_child(GRACEFUL, str(log), str(marker)) == {"ok": True}
    kinds = types(log)
    assert kinds[-1] == "tool/result" and "turn/end" not in kinds and "step/end" not in kinds  # left open, as a crash would
    report = run_child(DECIDER, str(log), str(marker), "approve")
    assert report["pending"] == [["c1", "rm", '{"path": "old.log"}']]
    assert marker.read_text() == "old.log"
    with Session.open(log, read_only=True) as session:
        assert [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"] == ["completed"]
        assert sorted(e.data["message"].source["call_id"] for e in session.events if e.type == "tool/result") == ["c1", "c2"]


SHUTDOWN_IN_ORDER = GRACEFUL.replace(
    "        # returning ends asyncio.run, which cancels the agent's task: a graceful shutdown\n",
    textwrap.dedent(
        """\
        # A shutdown cancels every task in no set order: here the waiting call's body first
        # (sys.argv[3] == "body-first") or the agent's driver first, each let run before the next.
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        bodies = [task for task in others if "_run_call" in repr(task.get_coro())]
        assert bodies, [repr(task.get_coro()) for task in others]
        rest = [task for task in others if task not in bodies]
        for task in (bodies + rest if sys.argv[3] == "body-first" else rest + bodies):
            task.cancel()
            await asyncio.sleep(0)
        await asyncio.gather(*others, return_exceptions=True)
        """
    ).replace("\n", "\n        ").rstrip(" "),
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("order", ["body-first", "driver-first"])
def test_a_shutdown_leaves_the_ask_open_whichever_task_it_cancels_first(tmp_path: Path, order: str) -> None:
    log, marker = tmp_path / "chat.jsonl", tmp_path / "removed"
    assert run_child(SHUTDOWN_IN_ORDER, str(log), str(marker), order) == {"ok": True}
    kinds = types(log)
    assert "turn/end" not in kinds and "step/end" not in kinds  # left open, as a crash would
    report = run_child(DECIDER, str(log), str(marker), "approve")
    assert report["pending"] == [["c1", "rm", '{"path": "old.log"}']]
    assert marker.read_text() == "old.log"
