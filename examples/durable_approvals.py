"""Durable approvals: a call waits for a person, the process goes away, and a new process on the
same log approves it and finishes the turn. Nothing but the log carries the wait across."""

import asyncio
import tempfile
from pathlib import Path

from dshkit import create_user_message
from dshkit.agent import Agent, RunResult, tool
from dshkit.models import ScriptedModel, call
from dshkit.session import Session


@tool(approval="ask")
def deploy(version: str) -> str:
    """Deploy a version to production."""
    return f"deployed {version}"


async def first_process(path: Path) -> None:
    session = Session.create(path)
    agent = Agent(ScriptedModel([call("deploy", version="1.2")]), session=session, tools=[deploy])
    agent.followup(create_user_message("Ship 1.2", source={"kind": "user"}))
    await agent.when_waiting()
    for pending in agent.pending_approvals():
        print("waiting:", pending.tool, pending.arguments)
    session.close()  # the process ends here without an answer (asyncio.run then cancels the waiting agent)


async def second_process(path: Path) -> None:
    session = Session.open(path)
    agent = Agent(ScriptedModel(["Version 1.2 is live."]), session=session, tools=[deploy])
    pending = agent.pending_approvals()
    print("found after restart:", [(p.tool, p.call_id == pending[0].call_id) for p in pending])
    agent.approve(pending[0].call_id)
    await agent.when_idle()
    result = RunResult.from_log(session)
    print(result.status, "-", result.output)
    session.close()


with tempfile.TemporaryDirectory() as folder:
    log = Path(folder) / "deploy.jsonl"
    asyncio.run(first_process(log))
    asyncio.run(second_process(log))
