"""`dshkit demo`: an offline walk through what dshkit guarantees, with real output.

First an agent in one call (`run_sync` with a typed tool and a typed `output_type`). Then two
parts: the message core (identity, immutability, import), then a multi-turn agent session
over a real temporary workspace with real file tools, driven by `ScriptedModel` (no network,
same behaviour on every run). The agent part shows a follow-up queued while busy, a steer, an
inject, a `pre_step` hook that rewrites a prompt (same id) and adds context (new id), a turn
cancelled mid-stream, a tool result pruned (same id) and a summary compaction (new id), then the
path a few ids took (inbox, claim, log, request) and the command that verifies the log. Last, a
subagent that answers with an MCP server's tool (`dshkit.cli.demo_delegation`), in logs of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dshkit
from dshkit.cli.demo_delegation import run_delegation
from dshkit.cli.demo_script import APP, NOTES, TODO, script
from dshkit.cli.log_paths import unwritable_new_log


@dataclass
class Sum:
    """The first agent's typed answer."""

    total: int
    explanation: str


def show_first_agent() -> None:
    """One call: `run_sync` with a typed tool and `output_type`, a typed result read from the log."""
    print("== An agent in one call: run_sync, a typed tool, typed output ==")
    try:
        from dshkit.agent import Agent, tool
        from dshkit.models import ScriptedModel, call, output

        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        script = ScriptedModel([call("add", a=2, b=3), call("final_result", total="five"), output(Sum(5, "2 + 3 = 5"))])
        result = Agent(script, tools=[tool(add)]).run_sync("What is 2 + 3?", output_type=Sum)
    except ImportError as missing:  # typed tools and output need pydantic (dshkit[typed])
        print(f"  (skipped: {missing})\n")
        return
    print("  result = Agent(model, tools=[add]).run_sync('What is 2 + 3?', output_type=Sum)")
    print(f"  result.output  {result.output!r}")
    results = [m.content[0]["content"][0]["text"] for m in result.messages if m.content[0]["type"] == "tool_result"]
    retry = next(text for text in results if "did not validate" in text)
    print(f"  a bad answer went back to the model: {retry.splitlines()[1]}")
    print(f"  status {result.status}, {result.usage.requests} requests, {result.usage.tool_calls} tool call, "
          f"{len(result.messages)} messages (seqs {result.seqs.start}-{result.seqs.stop - 1} of the log)\n")


def show_message_core() -> None:
    """Creation, import, a same-id rewrite, serialisation, and a refused mutation."""
    print("== Messages are identified immutable values ==")
    prompt = dshkit.create_user_message("List the files, please.", source={"kind": "user"})
    print(f"created   {prompt.id}  role={prompt.role}  text={prompt.text!r}")

    imported = dshkit.freeze_message(
        {
            "id": "imported-7f3a",
            "role": "user",
            "content": [{"type": "text", "text": "a message from another system"}],
            "source": {"kind": "user"},
        }
    )
    print(f"imported  {imported.id}  (the id is kept verbatim)")

    rewritten = prompt.with_content("List the files in the workspace, please.")
    print(f"rewritten {rewritten.id}  same id: {rewritten.id == prompt.id}  text={rewritten.text!r}")

    text = prompt.to_json()
    print(f"json      {text}")
    print(f"reloaded  equal: {dshkit.Message.from_json(text) == prompt}")

    try:
        prompt.content[0]["text"] = "changed"  # type: ignore[index,assignment]  # refused on purpose: the demo shows it
    except TypeError as error:
        print(f"mutation  refused: TypeError: {error}")
    try:
        dshkit.create_user_message("x", source={"kind": "user"}, id="mine")  # type: ignore[call-arg]
    except TypeError as error:
        print(f"forged id refused: TypeError: {error}")
    print(json.dumps(dshkit.thaw(prompt.source)))


# -- the agent part ---------------------------------------------------------------------------

def short(message_id: str) -> str:
    """A short form of an id for the transcript (the random tail of a ULID)."""
    return "…" + message_id[-6:]


def one_line(text: str, limit: int = 72) -> str:
    """`text` on one line, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def make_workspace(root: Path) -> None:
    """Write the demo's small project (todo, notes, one source file) under `root`."""
    (root / "src").mkdir(parents=True)
    (root / "todo.txt").write_text(TODO)
    (root / "notes.md").write_text(NOTES)
    (root / "src" / "app.py").write_text(APP)


def file_tools(root: Path) -> list[Any]:
    """list_files, read_file and write_file, confined to `root` (write runs alone)."""
    from dshkit.agent import Tool

    root = root.resolve()  # resolved paths are compared with it: a symlinked root must match them

    def inside(path: str) -> Path:
        resolved = (root / path).resolve()
        if resolved != root and root not in resolved.parents:
            raise PermissionError(f"{path!r} is outside the workspace")
        return resolved

    async def list_files(arguments: dict[str, Any], ctx: Any) -> str:
        folder = inside(arguments.get("path", "."))
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
        return "\n".join(entries)

    async def read_file(arguments: dict[str, Any], ctx: Any) -> str:
        return inside(arguments["path"]).read_text()

    async def write_file(arguments: dict[str, Any], ctx: Any) -> str:
        target = inside(arguments["path"])
        target.write_text(arguments["content"])
        return f"wrote {len(arguments['content'])} characters to {arguments['path']}"

    path_schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    write_schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    }
    return [
        Tool("list_files", "List the entries of a workspace folder.", path_schema, list_files),
        Tool("read_file", "Read a text file of the workspace.", {**path_schema, "required": ["path"]}, read_file),
        Tool("write_file", "Replace a text file of the workspace.", write_schema, write_file, parallel=False),
    ]


class Transcript:
    """Prints the agent's live events as a readable transcript and records each id's path."""

    def __init__(self) -> None:
        self.paths: dict[str, list[str]] = {}
        self.requests = 0
        self.labels: dict[str, str] = {}

    def note(self, message_id: str, step: str) -> None:
        """Record one step of the path a message id took."""
        self.paths.setdefault(message_id, []).append(step)

    def __call__(self, event: Any) -> None:
        kind, message = event.type, event.message
        if kind == "turn_start":
            print(f"turn {event.turn}")
        elif kind == "turn_end":
            reason = dict(event.data["reason"])
            detail = f" ({reason['cause']})" if "cause" in reason else ""
            print(f"turn {event.turn} ended: {reason['kind']}{detail}")
        elif kind == "inserted":
            self.note(message.id, f"inbox {event.data['target']} (event #{event.data['seq']})")
            print(f"  queued    {short(message.id)} to {event.data['target']}: {one_line(message.text)!r}")
        elif kind == "discarded":
            self.note(message.id, f"discarded (event #{event.data['seq']})")
        elif kind == "replaced":
            self.note(message.id, f"replaced in the inbox (event #{event.data['seq']})")
        elif kind == "claimed":
            self.note(message.id, f"claimed by turn {event.turn} (event #{event.data['seq']})")
        elif kind == "request":
            self.requests += 1
            for sent in event.data["request"].messages:
                self.note(sent.id, f"request {self.requests}")
        elif kind == "message":
            self.note(message.id, f"logged as {event.data['event_type']} (event #{event.data['seq']})")
            print(self.describe(message, interrupted=bool(event.data.get("interrupted"))))

    @staticmethod
    def describe(message: dshkit.Message, *, interrupted: bool = False) -> str:
        """One transcript line for a message: short id, role, source kind and text."""
        source = message.source
        if source["kind"] == "tool":
            block = message.content[0]
            body = " ".join(part.get("text", "") for part in block["content"])
            flag = " error" if block["is_error"] else ""
            return f"    tool      {short(message.id)} result of {source['call_id']}{flag}: {one_line(body)!r}"
        if message.role == "assistant":
            parts = []
            for block in message.content:
                if block["type"] == "reasoning":
                    parts.append(f"(thinks: {one_line(block['text'], 40)})")
                elif block["type"] == "text":
                    parts.append(repr(one_line(block["text"])))
                elif block["type"] == "tool_call":
                    parts.append(f"calls {block['name']}({block['arguments']})")
            flag = " [interrupted]" if interrupted else ""
            return f"    assistant {short(message.id)}{flag}: {' '.join(parts)}"
        who = "user" if source["kind"] == "user" else f"{source['kind']}:{source.get('plugin', '')}"
        return f"    {who:<9} {short(message.id)}: {one_line(message.text)!r}"

    def collapsed(self, message_id: str) -> Iterator[str]:
        """The recorded path of an id, with runs of requests folded into ranges."""
        run: list[int] = []
        for step in self.paths.get(message_id, []):
            if step.startswith("request "):
                run.append(int(step.split()[1]))
                continue
            if run:
                yield _request_range(run)
                run = []
            yield step
        if run:
            yield _request_range(run)


def _request_range(numbers: list[int]) -> str:
    return f"request {numbers[0]}" if len(numbers) == 1 else f"requests {numbers[0]}-{numbers[-1]}"


def workspace_pre_step(traced: dict[str, str]) -> Callable[[Any], Any]:
    """The demo's `pre_step` hook: on the first step it rewrites the prompt and adds a snapshot."""
    from dshkit.agent import Enter

    def pre_step(ctx: Any) -> Enter:
        # Expands "my workspace" in place (same id: a representation change) and adds a
        # snapshot of the workspace as context (a new message, with its own new id).
        if ctx.turn != 1 or ctx.step != 1:
            return Enter(ctx.messages)
        prompt = ctx.messages[-1]
        rewritten = prompt.with_content(prompt.text.replace("my workspace", "the workspace folder"))
        snapshot = dshkit.create_user_message(
            "Workspace snapshot: 3 entries, last change just now.",
            source={"kind": "plugin", "plugin": "workspace", "form": "snapshot"},
        )
        traced[snapshot.id] = "context added by pre_step (new id)"
        print(f"  pre_step  rewrote {short(prompt.id)} (same id), added context {short(snapshot.id)} (new id)")
        return Enter([snapshot, rewritten])

    return pre_step


def scripted_user(agent: Any, followup_while_busy: Any, steer: Any) -> Callable[[Any], None]:
    """The demo's "user": an agent event observer that follows up, steers and cancels at set points."""
    state = {"turn": 0}
    deltas = {"count": 0}

    def user_actions(event: Any) -> None:
        # The "user" acts at precise points of the run (no timing involved).
        if event.type == "turn_start":
            state["turn"] = event.turn
        if event.type == "tool_call" and event.data["name"] == "list_files":
            print("  (the user types a follow-up while the agent is busy)")
            agent.followup(followup_while_busy)
        if event.type == "tool_call" and event.data["call_id"] == "call_read_todo":
            print("  (the user steers while the tool runs: it enters after the result)")
            agent.steer(steer)
        if event.type == "delta" and state["turn"] == 3 and event.data["chunk"]["type"] == "text_delta":
            deltas["count"] += 1
            if deltas["count"] == 6:
                print("  (the user presses stop mid-answer)")
                agent.cancel("user pressed stop")

    return user_actions


def prune_and_compact(agent: Any, session: Any, transcript: Transcript, traced: dict[str, str], question: Any) -> None:
    """The demo's maintenance: a question queued meanwhile, a tool result pruned, old turns compacted."""
    print("\n== Maintenance while idle: prune a tool result, compact old turns ==")
    agent.followup(question)  # stays queued, with its id, until maintenance is over
    print("            (it waits: maintenance runs only while the agent is idle)")
    result = next(m for m in session.messages() if m.source.get("call_id") == "call_read_notes")
    block = result.content[0]
    pruned = result.with_content(
        [{**block, "content": [{"type": "text", "text": f"[pruned: notes.md, {len(NOTES)} characters]"}]}]
    )
    event = session.replace(pruned)
    traced[result.id] = "tool result pruned (same id)"
    transcript.note(result.id, f"pruned in place (event #{event.seq}, same id)")
    print(f"  pruned    {short(result.id)} in place: same id, new content")
    messages = session.messages()
    last_of_turn_2 = max(i for i, m in enumerate(messages) if m.text.startswith("First on the list"))
    summary = dshkit.create_user_message(
        "Summary of earlier turns: the workspace has notes.md, todo.txt and src/; "
        "todo.txt now also lists “write the demo”.",
        source={"kind": "plugin", "plugin": "compact", "form": "recall", "compaction_id": dshkit.new_message_id()},
    )
    event = session.compact(messages[0].id, messages[last_of_turn_2].id, summary)
    traced[summary.id] = "summary checkpoint (new id)"
    transcript.note(summary.id, f"logged as user/message (event #{event.seq}), replacing {last_of_turn_2 + 1} messages")
    print(f"  compacted {last_of_turn_2 + 1} messages into summary {short(summary.id)} (new id)")
    print()


async def run_agent(workspace: Path, log_path: Path) -> tuple[Transcript, dict[str, str], Any]:
    """The scripted session; returns the transcript, the ids worth tracing, and the session."""
    from dshkit.agent import Agent
    from dshkit.models import ScriptedModel
    from dshkit.session import Session

    session = Session.create(log_path)
    transcript = Transcript()
    traced: dict[str, str] = {}
    # A small delay makes the stream a real stream: the cancel below lands mid-answer.
    model = ScriptedModel(script(), provider="scripted", model="demo-1", delay=0.002)
    agent = Agent(
        model,
        session=session,
        tools=file_tools(workspace),
        system="You are a careful assistant working in a small workspace.",
        hooks={"pre_step": workspace_pre_step(traced)},
    )
    agent.subscribe(transcript)
    followup_while_busy = dshkit.create_user_message("Read todo.txt and tell me what comes first.", source={"kind": "user"})
    steer = dshkit.create_user_message("Also add “write the demo” to the list.", source={"kind": "user"})
    agent.subscribe(scripted_user(agent, followup_while_busy, steer))

    print("\n== An agent turn by turn (ScriptedModel, offline) ==")
    print(f"workspace {workspace}")
    first = dshkit.create_user_message("What's in my workspace?", source={"kind": "user"})
    traced[first.id] = "prompt rewritten by pre_step (same id)"
    traced[followup_while_busy.id] = "follow-up queued while busy"
    traced[steer.id] = "steer"
    agent.followup(first)
    await agent.when_idle()

    note = dshkit.create_user_message(
        "The user prefers short answers.", source={"kind": "plugin", "plugin": "preferences", "form": "notice"}
    )
    traced[note.id] = "injected context (no wake)"
    print("(idle) inject a note: it waits for the next step and wakes nothing")
    agent.inject(note)
    print(f"  status after inject: {agent.status}")
    agent.followup(dshkit.create_user_message("Summarise notes.md.", source={"kind": "user"}))
    await agent.when_idle()

    question = dshkit.create_user_message("What's left on my list?", source={"kind": "user"})
    traced[question.id] = "asked during maintenance"
    await agent.run_maintenance(lambda: prune_and_compact(agent, session, transcript, traced, question))
    await agent.when_idle()
    return transcript, traced, session


def show_paths(transcript: Transcript, traced: dict[str, str]) -> None:
    """Print, for each traced message, the path its id took (inbox, claim, log, request)."""
    print("\n== The path each id took ==")
    for message_id, label in traced.items():
        print(f"{short(message_id)}  {message_id}  {label}")
        for step in transcript.collapsed(message_id):
            print(f"    {step}")


def show_history(session: Any) -> None:
    """Print the derived history: each message with the event that put it on the surface."""
    print("\n== The model-visible history now (derived from the log) ==")
    for message in session.messages():
        event = session.message_event(message.id)
        interrupted = event.type == "assistant/message" and bool(event.data.get("interrupted"))
        print(Transcript.describe(message, interrupted=interrupted))


def main(args: argparse.Namespace) -> int:
    """Run the demonstration; returns the exit code."""
    chosen = getattr(args, "log", None)
    reason = unwritable_new_log(chosen, files_only=True) if chosen else None
    if reason is not None:  # said before the demo starts, not after half of it ran
        print(f"dshkit demo: --log {reason}", file=sys.stderr)
        return 2
    show_first_agent()
    show_message_core()
    scratch = Path(tempfile.mkdtemp(prefix="dshkit-demo-"))
    workspace = scratch / "workspace"
    log_path = Path(chosen) if chosen else scratch / "session.jsonl"
    try:
        make_workspace(workspace)
        transcript, traced, session = asyncio.run(run_agent(workspace, log_path))
        show_history(session)
        show_paths(transcript, traced)
        print(f"\ntodo.txt now reads: {(workspace / 'todo.txt').read_text().splitlines()}")
        asyncio.run(run_delegation(workspace / "delegation"))  # its two logs go with the workspace
        events = len(session.events)
        session.close()
    finally:
        # The scratch folder outlives the run only when it holds the log (no --log given).
        shutil.rmtree(workspace if not chosen else scratch, ignore_errors=True)
    print(f"\nThe log ({events} events) is at {log_path}. Check its invariants:")
    print(f"  dshkit log verify {log_path}")
    return 0
