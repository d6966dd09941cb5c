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

from dshkit.agent import Agent
from dshkit.llm import create_user_message
from dshkit.models.chat_stream import usage_summary
from dshkit.models.selection import from_env
from dshkit.session import Session, SessionError

__all__ = ["default_log_path", "main"]

_EXIT_COMMANDS = frozenset(("/exit", "/quit"))
_INTERRUPT = object()  # put in the input queue by Ctrl-C at the prompt


def default_log_path(environ: Any = None) -> Path:
    """A new log file under the user's state directory (created when needed)."""
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    directory = Path(state) / "dshkit" / "chats"
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = directory / f"chat-{stamp}.jsonl"
    number = 1
    while candidate.exists():
        number += 1
        candidate = directory / f"chat-{stamp}-{number}.jsonl"
    return candidate


def main(args: argparse.Namespace) -> int:
    """Run the chat; returns the exit code (2 when the model is not configured)."""
    err = sys.stderr
    try:
        model = from_env(api=getattr(args, "api", None), on_retry=_RetryNotice(err))
    except ValueError as error:
        print(f"dshkit chat: {error}", file=err)
        return 2
    path = Path(args.log) if getattr(args, "log", None) else default_log_path()
    resuming = path.exists()
    try:
        session = Session.open(path) if resuming else Session.create(path)
    except (OSError, SessionError) as error:
        print(f"dshkit chat: cannot {'open' if resuming else 'create'} the log {path}: {error}", file=err)
        return 1
    chat = _Chat(model, session, path, getattr(args, "system", None), sys.stdin, sys.stdout, err)
    try:
        return asyncio.run(chat.run(resuming=resuming))
    except KeyboardInterrupt:  # platforms without loop signal handlers
        print(file=err)
        return 130
    finally:
        session.close()


class _RetryNotice:
    def __init__(self, err: IO[str]) -> None:
        self._err = err

    def __call__(self, attempt: int, delay: float, error: BaseException) -> None:
        print(f"\n[{error}; retry {attempt} in {delay:.1f}s]", file=self._err, flush=True)


class _Chat:
    def __init__(
        self, model: Any, session: Any, path: Path, system: str | None, stdin: IO[str], out: IO[str], err: IO[str]
    ) -> None:
        self.model = model
        self.session = session
        self.path = path
        self.system = system
        self.stdin = stdin
        self.out = out
        self.err = err
        self.interactive = stdin.isatty()
        self.styled = err.isatty()
        self._wrote_text = False
        self._wrote_reasoning = False

    async def run(self, *, resuming: bool) -> int:
        session = self.session
        agent = Agent(self.model, session=session, system=self.system)
        agent.subscribe(self._on_event)
        loop = asyncio.get_running_loop()
        inputs: asyncio.Queue[object] = asyncio.Queue()
        _start_reader(self.stdin, loop, inputs)
        handles_sigint = _install_sigint(loop, lambda: self._on_sigint(agent, inputs))
        history = len(session.messages())
        self._note(
            f"dshkit chat: {self.model.model} at {self.model.url} (provider {self.model.provider}); "
            f"log {self.path}" + (f" (continuing, {history} messages)" if resuming else "")
        )
        try:
            while True:
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
                await agent.when_idle()
        finally:
            if handles_sigint:
                loop.remove_signal_handler(signal.SIGINT)
            await agent.close()
            await self.model.aclose()
            self._note(f"log written to {self.path}")
        return 0

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
            if self.styled:
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
                self._note(f"[error: {error.get('message', error)}]")
            elif kind == "max_tokens":
                self._note("[stopped: the answer reached max_tokens]")
            self._wrote_text = self._wrote_reasoning = False

    def _usage(self, event: Any) -> str:
        seq = event.data.get("seq")
        if not isinstance(seq, int):
            return ""
        usage = self.session.events[seq].data.get("usage")
        if not usage:
            return ""
        summary = usage_summary(usage)
        parts = []
        if "input_tokens" in summary:
            cached = summary.get("cached_input_tokens")
            parts.append(f"{summary['input_tokens']} in" + (f" ({cached} cached)" if cached else ""))
        if "output_tokens" in summary:
            reasoning = summary.get("reasoning_tokens")
            parts.append(f"{summary['output_tokens']} out" + (f" ({reasoning} reasoning)" if reasoning else ""))
        return f"[tokens: {', '.join(parts)}]" if parts else ""

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
        return f"\x1b[2m{text}\x1b[0m" if self.styled else text


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
