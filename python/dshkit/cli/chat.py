"""`dshkit chat`: an interactive session in the terminal against a model over HTTP.

The model comes from the environment (`dshkit.models.from_env`: ``DSHKIT_BASE_URL``,
``DSHKIT_MODEL``, ``DSHKIT_API_KEY``, ``DSHKIT_PROVIDER``); ``--api`` or ``DSHKIT_API`` picks the
wire format (``chat``: Chat Completions, the default; ``anthropic``: Messages; ``responses``). Each line read from standard input is one follow-up turn;
the answer streams to standard output and reasoning (when the model sends any) to standard error.
Ctrl-C during an answer cancels that turn and keeps what was already streamed (logged as an
interrupted assistant message, sent back to the model next time); Ctrl-C at the prompt, Ctrl-D,
``/exit`` or ``/quit`` end the session. The log is written as the session goes: ``--log PATH``
continues an existing log or starts one there; by default a new file is created under
``$XDG_STATE_HOME/dshkit/chats`` (``~/.local/state/dshkit/chats``).

On a terminal the prompt has readline line editing and a history kept in
``$XDG_STATE_HOME/dshkit/chat_history``; colour (dimmed notes and reasoning) is used only on a
terminal and never when ``NO_COLOR`` is set. Exit status: 0 when every turn completed (or was
interrupted by the user), 1 when a turn failed (an unreachable server, an HTTP 5xx, a malformed
answer) or the log could not be opened, 2 when the configuration is wrong (``DSHKIT_*`` missing
or invalid, or the endpoint refused the API key: HTTP 401/403).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from dshkit.agent import Agent, Compaction
from dshkit.agent._compaction.tokens import meter_label
from dshkit.cli.chat_approvals import PROMPT, apply_reply, describe_call
from dshkit.cli.log_paths import unreadable_log, unwritable_new_log
from dshkit.cli.terminal import LineEditor, colour_enabled, state_dir, warnings_as_lines
from dshkit.llm import create_user_message
from dshkit.models.stream_translation import usage_summary
from dshkit.models.selection import from_env
from dshkit.session import Session, SessionError
from dshkit.session.stores import is_url

__all__ = ["default_log_path", "main"]

_EXIT_COMMANDS = frozenset(("/exit", "/quit"))
_INTERRUPT = object()  # put in the input queue by Ctrl-C at the prompt


def default_log_path(environ: Any = None) -> Path:
    """A new log file under the user's state directory (created when needed)."""
    directory = state_dir(environ) / "chats"
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = directory / f"chat-{stamp}.jsonl"
    number = 1
    while candidate.exists():
        number += 1
        candidate = directory / f"chat-{stamp}-{number}.jsonl"
    return candidate


def main(args: argparse.Namespace) -> int:
    """Run the chat; returns the exit code (1 a turn failed, 2 the model is not configured)."""
    err = sys.stderr
    try:
        model = from_env(api=getattr(args, "api", None), on_retry=_RetryNotice(err))
    except ValueError as error:
        print(f"dshkit chat: {error}", file=err)
        return 2
    chosen = getattr(args, "log", None)
    if chosen and is_url(chosen):  # the chat continues or starts a log file (a URL would also need --session)
        print(f"dshkit chat: --log {unwritable_new_log(chosen, files_only=True)}", file=err)
        return 1
    path = Path(chosen) if chosen else default_log_path()
    resuming = path.exists()
    session = _open_log(path, resuming, err)
    if session is None:
        return 1
    editor = LineEditor(state_dir() / "chat_history") if _edits_lines(sys.stdin, sys.stdout) else None
    chat = _Chat(
        model, session, path, getattr(args, "system", None), sys.stdin, sys.stdout, err,
        editor=editor, context_window=getattr(args, "context_window", None),
    )
    try:
        return asyncio.run(chat.run(resuming=resuming))
    except KeyboardInterrupt:  # platforms without loop signal handlers
        print(file=err)
        return 130
    finally:
        session.close()


def _open_log(path: Path, resuming: bool, err: IO[str]) -> Session | None:
    """The chat's log, continued or created at `path`; ``None`` after one line saying why it cannot be."""
    reason = unreadable_log(str(path)) if resuming else unwritable_new_log(str(path))
    if reason is not None:
        print(f"dshkit chat: --log {reason}", file=err)
        return None
    try:
        with warnings_as_lines("dshkit chat", err):  # a torn last line cut off: one plain line
            return Session.open(path) if resuming else Session.create(path)
    except OSError as error:
        print(f"dshkit chat: cannot {'open' if resuming else 'create'} the log {path}: {error.strerror or error}", file=err)
    except (SessionError, ValueError) as error:
        print(f"dshkit chat: cannot {'open' if resuming else 'create'} the log {path}: {error}", file=err)
    return None


def _edits_lines(stdin: IO[str], out: IO[str]) -> bool:
    """`input` uses readline only when both standard input and output are terminals."""
    try:
        return stdin.isatty() and out.isatty()
    except (AttributeError, ValueError):
        return False


class _RetryNotice:
    def __init__(self, err: IO[str]) -> None:
        self._err = err

    def __call__(self, attempt: int, delay: float, error: BaseException) -> None:
        print(f"\n[{error}; retry {attempt} in {delay:.1f}s]", file=self._err, flush=True)


class _Chat:
    def __init__(
        self,
        model: Any,
        session: Any,
        path: Path,
        system: str | None,
        stdin: IO[str],
        out: IO[str],
        err: IO[str],
        *,
        editor: LineEditor | None = None,
        context_window: int | None = None,
        tools: Any = (),
    ) -> None:
        self.model = model
        self.session = session
        self.path = path
        self.system = system
        self.stdin = stdin
        self.out = out
        self.err = err
        self.editor = editor
        self.tools = tuple(tools)
        compaction = Compaction(context_window=context_window) if context_window else None
        self.agent = Agent(model, session=session, system=system, compaction=compaction, tools=self.tools)
        self.interactive = stdin.isatty()
        self.on_terminal = err.isatty()
        self.colour = colour_enabled(err)
        self.failed_turns = 0
        self.refused_key = False
        self._wrote_text = False
        self._wrote_reasoning = False

    async def run(self, *, resuming: bool) -> int:
        session = self.session
        agent = self.agent
        agent.subscribe(self._on_event)
        loop = asyncio.get_running_loop()
        inputs: asyncio.Queue[object] = asyncio.Queue()
        if self.editor is None:
            _start_reader(self.stdin, loop, inputs)

        def on_sigint() -> None:
            self._on_sigint(agent, inputs)

        handles_sigint = _install_sigint(loop, on_sigint)
        history = len(session.messages())
        self._note(
            f"dshkit chat: {self.model.model} at {self.model.url} (provider {self.model.provider}); "
            f"log {self.path}" + (f" (continuing, {history} messages)" if resuming else "")
        )
        line: object
        sigint = on_sigint if handles_sigint else None
        try:
            if agent.pending_approvals():  # an earlier run stopped while a call waited for a person
                await self._settle(agent, inputs, loop, sigint)
            while True:
                if self.editor is not None:
                    line = self._edit_line(loop, on_sigint if handles_sigint else None)
                else:
                    if self.interactive:
                        self.err.write("> ")
                        self.err.flush()
                    line = await inputs.get()
                if line is None or line is _INTERRUPT:
                    break
                text = str(line).rstrip("\r\n")
                if not text.strip():
                    continue
                if text.strip() in _EXIT_COMMANDS:
                    break
                agent.followup(create_user_message(text, source={"kind": "user"}))
                await self._settle(agent, inputs, loop, sigint)
        finally:
            if handles_sigint:
                loop.remove_signal_handler(signal.SIGINT)
            await agent.close()
            await self.model.aclose()
            if self.editor is not None:
                self.editor.save()
            self._note(f"log written to {self.path}")
        if self.refused_key:
            return 2
        return 1 if self.failed_turns else 0

    async def _settle(self, agent: Agent, inputs: asyncio.Queue[object], loop: asyncio.AbstractEventLoop, sigint: Any) -> None:
        """Wait for the turn to end, asking at the terminal for each call that needs approval."""
        while True:
            await agent.when_waiting()
            pending = agent.pending_approvals()
            if not pending:
                await agent.when_idle()
                return
            self._end_line()
            self._note(describe_call(pending[0]))
            while True:
                if self.editor is not None:
                    reply = self._edit_line(loop, sigint, PROMPT)
                else:
                    self.err.write(PROMPT)
                    self.err.flush()
                    got = await inputs.get()
                    if got is None:
                        inputs.put_nowait(None)  # the end of input also ends the session, after this turn
                    reply = None if got is None or got is _INTERRUPT else str(got)
                if apply_reply(agent, pending[0], reply):
                    break

    def _edit_line(self, loop: asyncio.AbstractEventLoop, on_sigint: Any, prompt: str = "> ") -> str | None:
        """Read the next prompt line with readline, on the main thread, while the agent is idle.

        The loop's SIGINT handler is lifted meanwhile, so that Ctrl-C interrupts `input` (which
        then restores the terminal) and ends the session.
        """
        assert self.editor is not None
        if on_sigint is not None:
            loop.remove_signal_handler(signal.SIGINT)
        try:
            return self.editor.read(prompt)
        except KeyboardInterrupt:
            self.out.write("\n")
            return None
        finally:
            if on_sigint is not None:
                _install_sigint(loop, on_sigint)

    def _on_sigint(self, agent: Any, inputs: asyncio.Queue[object]) -> None:
        if agent.status == "running":
            agent.cancel("user")
        else:
            inputs.put_nowait(_INTERRUPT)

    def _on_event(self, event: Any) -> None:
        if event.type == "delta":
            chunk = event.data["chunk"]
            kind = chunk.get("type")
            if kind == "text_delta":
                if self._wrote_reasoning and not self._wrote_text:
                    self.err.write("\n")
                    self.err.flush()
                self.out.write(chunk["text"])
                self.out.flush()
                self._wrote_text = True
            elif kind == "reasoning_delta":
                self.err.write(self._dim(chunk["text"]))
                self.err.flush()
                self._wrote_reasoning = True
        elif event.type == "message" and event.data.get("event_type") == "assistant/message":
            if event.data.get("interrupted"):
                return
            if self.on_terminal:
                usage = self._usage(event)
                if usage:
                    self._end_line()
                    self._note(usage)
        elif event.type == "turn_end":
            self._end_line()
            reason = event.data.get("reason") or {}
            kind = reason.get("kind")
            if kind == "aborted":
                self._note("[interrupted]")
            elif kind == "error":
                error = reason.get("error") or {}
                self.failed_turns += 1
                self._note(f"[error: {error.get('message', error)}]")
                hint = _key_hint(error.get("status"))
                if hint:
                    self.refused_key = True
                    self._note(hint)
            elif kind == "max_tokens":
                self._note("[stopped: the answer reached max_tokens]")
            self._wrote_text = self._wrote_reasoning = False

    def _usage(self, event: Any) -> str:
        seq = event.data.get("seq")
        if not isinstance(seq, int):
            return ""
        usage = self.session.events[seq].data.get("usage")
        if not usage:
            return self._meter()
        summary = usage_summary(usage)
        parts = []
        if "input_tokens" in summary:
            cached = summary.get("cached_input_tokens")
            parts.append(f"{summary['input_tokens']} in" + (f" ({cached} cached)" if cached else ""))
        if "output_tokens" in summary:
            reasoning = summary.get("reasoning_tokens")
            parts.append(f"{summary['output_tokens']} out" + (f" ({reasoning} reasoning)" if reasoning else ""))
        meter = self._meter()
        return f"[tokens: {', '.join(parts)}] {meter}" if parts else meter

    def _meter(self) -> str:
        """The next request's size against the window, by the agent's own token meter."""
        return meter_label(self.agent.tokens, self.agent.context_window)

    def _end_line(self) -> None:
        if self._wrote_text:
            self.out.write("\n")
            self.out.flush()
            self._wrote_text = False
        if self._wrote_reasoning:
            self.err.write("\n")
            self.err.flush()
            self._wrote_reasoning = False

    def _note(self, text: str) -> None:
        self.err.write(self._dim(text) + "\n")
        self.err.flush()

    def _dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.colour else text


def _key_hint(status: object) -> str:
    """What to do when the endpoint refuses the credentials (HTTP 401/403), else ``""``."""
    if status not in (401, 403):
        return ""
    if not (os.environ.get("DSHKIT_API_KEY") or "").strip():
        return f"the endpoint refused the request (HTTP {status}): DSHKIT_API_KEY is not set; export your API key in it"
    if status == 401:
        return "the endpoint refused the API key (HTTP 401): check DSHKIT_API_KEY (and DSHKIT_BASE_URL: a key is valid at its own vendor only)"
    return "the API key is not allowed to do this (HTTP 403): check DSHKIT_API_KEY and that DSHKIT_MODEL is available to it"


def _start_reader(stdin: IO[str], loop: asyncio.AbstractEventLoop, inputs: asyncio.Queue[object]) -> None:
    """Read lines on a daemon thread: a blocked terminal read never holds up the exit."""

    def read() -> None:
        try:
            for line in iter(stdin.readline, ""):
                loop.call_soon_threadsafe(inputs.put_nowait, line)
        except (OSError, ValueError):
            pass
        finally:
            try:
                loop.call_soon_threadsafe(inputs.put_nowait, None)
            except RuntimeError:  # the loop is already closed: nobody is waiting
                pass

    threading.Thread(target=read, name="dshkit-chat-stdin", daemon=True).start()


def _install_sigint(loop: asyncio.AbstractEventLoop, handler: Any) -> bool:
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread
        return False
    return True
