"""SIGKILL a real child running many durable agents at once (issue 37): every turn the child saw
acknowledged (`when_idle` returned) is in its log after the kill, whole and in order.

The agents share one event loop and fsync at their durability points on worker threads while the
loop goes on appending for the others, so this is the case where an acknowledgement could run
ahead of its own appends. A process kill keeps what reached the OS, so the test proves order and
acknowledgement; what an fsync adds (surviving a power loss) no test here can cut the power to.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from dshkit.session import Session, SessionRecoveryWarning

from tests.support import DSHKIT_PATH

AGENTS = 12

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    import dshkit
    from dshkit.agent import Agent, Tool
    from dshkit.models import FunctionModel, call
    from dshkit.session import Session

    folder, agents = Path(sys.argv[1]), int(sys.argv[2])

    async def noop(arguments, ctx):
        await asyncio.sleep(0)
        return "ok"

    TOOLS = [Tool("noop", "does nothing", {"type": "object", "properties": {}}, noop)]

    def answer(request):
        # Two calls, then text, for whichever prompt the turn runs: a prompt a killed child queued
        # is in the log's inbox and runs first in the next child, so a script per prompt would not do.
        messages = request.messages
        prompt = max(i for i, m in enumerate(messages) if m.role == "user" and m.source["kind"] == "user")
        if len(messages) - 1 - prompt < 4:  # each call adds its assistant message and its result
            return call("noop", _id=f"call-{len(messages)}")  # unique in the session: the history only grows
        return f"done {messages[prompt].text}"

    async def run(index):
        path = folder / f"agent-{index}.jsonl"
        session = Session.open(path) if path.exists() else Session.create(path)
        turn = sum(event.type == "turn/end" for event in session.events)
        while True:
            turn += 1
            agent = Agent(FunctionModel(answer), session=session, tools=TOOLS)
            agent.followup(dshkit.create_user_message(f"prompt {index}-{turn}", source={"kind": "user"}))
            await agent.when_idle()
            print(f"acked {index} {turn} {len(session.events)}", flush=True)

    async def main():
        print("ready", flush=True)
        await asyncio.gather(*(run(index) for index in range(agents)))

    asyncio.run(main())
    """
)

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


def _acknowledgement(line: str) -> tuple[tuple[int, int], int] | None:
    """((agent, turn), events in that agent's log) of an "acked" line the child printed whole."""
    if not line.endswith("\n") or not line.startswith("acked "):
        return None  # the kill cut this line short: it is no acknowledgement
    _, index, turn, events = line.split()
    return (int(index), int(turn)), int(events)


def _run_until_killed(child: subprocess.Popen[str], acks_before_kill: int, delay: float) -> dict[tuple[int, int], int]:
    """Kill `child` `delay` seconds after it acknowledged `acks_before_kill` turns (a count, not a
    time: on a loaded machine a fixed time may see no turn end); every turn it acknowledged."""
    assert child.stdout is not None
    acked: dict[tuple[int, int], int] = {}
    while len(acked) < acks_before_kill:
        line = child.stdout.readline()
        assert line, "the child ended before it was killed"
        ack = _acknowledgement(line)
        if ack is not None:
            acked[ack[0]] = ack[1]
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    for line in child.stdout:
        ack = _acknowledgement(line)
        if ack is not None:
            acked[ack[0]] = ack[1]
    return acked


def _completed_prompts(session: Session) -> set[str]:
    """The prompts of the log's turns that ended completed."""
    completed: set[str] = set()
    prompt = None
    for event in session.events:
        if event.type == "user/message":
            prompt = event.message.text
        elif event.type == "turn/end" and event.data["reason"]["kind"] == "completed" and prompt is not None:
            completed.add(prompt)
    return completed


def test_a_kill_during_concurrent_durable_agents_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    rng = random.Random(20261205)
    env = {**os.environ, "PYTHONPATH": DSHKIT_PATH}
    acked: dict[tuple[int, int], int] = {}
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path), str(AGENTS)], stdout=subprocess.PIPE, text=True, env=env
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        acked.update(_run_until_killed(child, rng.randint(AGENTS // 2, 2 * AGENTS), rng.uniform(0.0, 0.3)))
        child.stdout.close()
        child.wait(timeout=60)
        assert child.returncode == -signal.SIGKILL
        for index in range(AGENTS):
            path = tmp_path / f"agent-{index}.jsonl"
            if not path.exists():
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SessionRecoveryWarning)  # a torn last line is allowed
                session = Session.open(path)  # crash repair closes the turn the kill cut short
            with session:
                completed = _completed_prompts(session)
                for (agent, turn), events in acked.items():
                    if agent == index:
                        assert len(session.events) >= events, (index, turn)
                        assert f"prompt {index}-{turn}" in completed, (index, turn)
    assert len(acked) > AGENTS  # the agents did make progress
