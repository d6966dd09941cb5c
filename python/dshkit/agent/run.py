"""`Agent.run`, `Agent.run_sync` and `Agent.run_stream`: one prompt, one turn, one `RunResult` or a typed error.

A run is a follow-up whose turn is waited for: the prompt is queued with `followup` (so input
arriving meanwhile keeps the usual rules: a steer joins the running turn, a follow-up gets a turn
of its own after it), the turn that claims it carries the run's `RunState` (limits, structured
output), and the run returns when that turn's ``turn/end`` is logged. The result is read from
the log (`RunResult`); a turn that did not succeed raises its `RunError` (`run_error`), carrying
the partial result.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from dshkit.agent.errors import OUTPUT_VALIDATION_FAILED, OutputValidationError, RunCancelled, RunError
from dshkit.agent.limits import UsageLimits
from dshkit.agent.result import RunResult
from dshkit.agent._run.state import MISSING, RunState, prompt_message
from dshkit.llm import Message

if TYPE_CHECKING:
    from dshkit.agent._input.inbox import Inbox
    from dshkit.agent.notifications import AgentEvent
    from dshkit.models.protocol import Model
    from dshkit.session import Session

_SUCCEEDED = ("completed", "max_tokens")
OutputT = TypeVar("OutputT")


class RunHost(Protocol):
    """What a run needs of its `dshkit.agent.Agent` (this module is one of Agent's bases, so it
    names the members it uses instead of importing the class)."""

    @property
    def model(self) -> Model: ...
    @property
    def session(self) -> Session: ...
    @property
    def inbox(self) -> Inbox: ...
    @property
    def runs(self) -> dict[str, RunState]: ...
    def followup(self, message: Message) -> None: ...
    def wake(self) -> bool: ...
    def cancel(self, cause: str = ..., *, keep_inbox: bool = ...) -> None: ...
    def subscribe(self, callback: Callable[[AgentEvent], object]) -> Callable[[], None]: ...
    async def when_idle(self) -> None: ...
    async def run(self, prompt: str | Message, **options: Any) -> RunResult[Any]: ...


class Runs:
    """`Agent`'s run methods: one prompt, the turn that runs it, its `RunResult` or `RunError`."""

    @overload
    async def run(self, prompt: str | Message, *, output_type: None = None, limits: UsageLimits | None = None, output_retries: int = 1) -> RunResult[str]: ...
    @overload
    async def run(self, prompt: str | Message, *, output_type: type[OutputT], limits: UsageLimits | None = None, output_retries: int = 1) -> RunResult[OutputT]: ...
    @overload
    async def run(self, prompt: str | Message, *, output_type: Any, limits: UsageLimits | None = None, output_retries: int = 1) -> RunResult[Any]: ...
    async def run(self, prompt: str | Message, *, output_type: Any = None, limits: UsageLimits | None = None, output_retries: int = 1) -> RunResult[Any]:
        """Run `prompt` (a str or a user `Message`) in a turn of its own; its `RunResult`.

        `output_type` asks for structured output (a pydantic model, dataclass, TypedDict, scalar,
        ``list[...]`` or a union): validated, with `output_retries` retries carrying the
        validation error back. `limits` bounds the run (`UsageLimits`). A turn that fails,
        is cancelled or hits a limit raises its `RunError` (`dshkit.agent.errors`), whose
        `result` holds what the run did.
        """
        # The whole wait is here, not in a coroutine of its own: one frame fewer on every resumption
        # of the caller (benches/bench_run.py). `RunStream` runs this too.
        agent: RunHost = self  # type: ignore[assignment]
        state = RunState(agent.model, prompt, output_type, limits, output_retries, "Agent.run")
        runs = agent.runs
        runs[state.message_id] = state
        try:
            agent.followup(state.message)
            try:
                await state.waiter
            except asyncio.CancelledError:
                _abandon(agent, state)
                raise
            if state.end is None:
                await _run_parked(agent, state)
        finally:
            runs.pop(state.message_id, None)
        # The result, or the error raised. Here rather than in a function of its own (one call fewer
        # at the end of every run); without an output type the output is the answer's text, read from
        # the log, so no keywords are passed (a call with keywords costs ~0.3 µs more in a turn).
        assert state.end is not None and state.turn is not None
        end_seq, reason = state.end
        spec = state.spec
        if spec is None:
            result: RunResult[Any] = RunResult(agent.session, state.turn, end_seq)
        else:
            result = RunResult(agent.session, state.turn, end_seq, output=state.output, spec=spec)
        if reason["kind"] not in _SUCCEEDED:
            raise result.error  # type: ignore[misc]
        if spec is not None and state.output is MISSING:
            raise _no_output(spec.name, reason, result)
        return result

    @overload
    def run_sync(self, prompt: str | Message, *, output_type: None = None, limits: UsageLimits | None = None, output_retries: int = 1) -> RunResult[str]: ...
    @overload
    def run_sync(self, prompt: str | Message, *, output_type: type[OutputT], limits: UsageLimits | None = None, output_retries: int = 1) -> RunResult[OutputT]: ...
    @overload
    def run_sync(self, prompt: str | Message, *, output_type: Any, limits: UsageLimits | None = None, output_retries: int = 1) -> RunResult[Any]: ...
    def run_sync(self, prompt: str | Message, *, output_type: Any = None, limits: UsageLimits | None = None, output_retries: int = 1) -> RunResult[Any]:
        """`run` for scripts and notebooks without a running event loop (an error inside one)."""
        return run_sync(self, prompt, output_type=output_type, limits=limits, output_retries=output_retries)  # type: ignore[arg-type]

    def run_stream(self, prompt: str | Message, *, output_type: Any = None, limits: UsageLimits | None = None, output_retries: int = 1) -> RunStream:
        """``async with agent.run_stream(prompt) as stream``: events as they happen, then `stream.result()`."""
        return RunStream(self, prompt, output_type, limits, output_retries)  # type: ignore[arg-type]


async def _run_parked(agent: RunHost, state: RunState) -> None:
    """The driver stopped without ending the run's turn: raise its own failure, if any; else, if the
    prompt is still pending (parked behind a failed turn), run it and wait again."""
    while True:
        await agent.when_idle()  # the driver's own failure, if any, is raised here
        if state.end is not None:
            return  # a relaunched driver ran it meanwhile
        if state.message_id not in agent.inbox:
            raise RunCancelled("the run's prompt was discarded before its turn started", info={"cause": "discarded"})
        state.waiter = asyncio.get_running_loop().create_future()
        agent.wake()
        try:
            await state.waiter
        except asyncio.CancelledError:
            _abandon(agent, state)
            raise
        if state.end is not None:
            return


def _no_output(name: str, reason: Mapping[str, Any], result: RunResult[Any]) -> OutputValidationError:
    """The error of a run with an output type whose turn succeeded without a valid output."""
    why = "the answer was cut at max_tokens" if reason["kind"] == "max_tokens" else "the turn ended without one"
    info = {"code": OUTPUT_VALIDATION_FAILED, "message": f"no valid {name}: {why}", "problems": ()}
    return OutputValidationError(info["message"], result=result, info=info)  # type: ignore[arg-type]


def _abandon(agent: RunHost, state: RunState) -> None:
    """The `run` call itself was cancelled: its prompt leaves the inbox, or its turn is aborted."""
    if state.turn is None:
        agent.inbox.remove(state.message_id, cause="run_cancelled")
    elif state.end is None:
        agent.cancel("run_cancelled", keep_inbox=True)


def run_sync(agent: RunHost, prompt: str | Message, **options: Any) -> RunResult[Any]:
    """`agent.run(...)` on a new event loop; a clear error inside a running one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # no loop in this thread: the one case run_sync is for
    else:
        raise RuntimeError(
            "Agent.run_sync: called inside a running asyncio event loop (an async function, Jupyter, ...); "
            "use `await agent.run(...)` there"
        )
    return asyncio.run(agent.run(prompt, **options))


@dataclass(frozen=True)
class RunEvent:
    """One event of a streamed run: ``"text"`` (a delta of the answer), ``"tool_call"``,
    ``"tool_result"`` (its `message`), or ``"output"`` (`output`: the partial structured output)."""

    kind: str
    text: str = ""
    call_id: str | None = None
    name: str | None = None
    message: Message | None = None
    output: Any = None


class RunStream:
    """``async with agent.run_stream(prompt) as stream``: ``async for event in stream``, then
    ``await stream.result()`` (the same `RunResult` as `run`, or its error raised).

    Leaving the block before the run ended cancels it. `partial_output` is the structured output
    parsed so far from the answer being streamed (validated only at the end, in the result).
    """

    def __init__(self, agent: RunHost, prompt: object, output_type: Any, limits: UsageLimits | None, output_retries: int) -> None:
        self._agent = agent
        self._args = (prompt, output_type, limits, output_retries)
        self._queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        self._task: asyncio.Task[RunResult[Any]] | None = None
        self._state: RunState | None = None  # the run's output mode, as `run` makes it (never queued)
        self._prompt_id: str | None = None
        self._turn: int | None = None  # the turn that claimed the prompt, once one did
        self._unsubscribe: Any = None
        self._partial = ""
        self._output_index: int | None = None
        self._output_calls: set[str] = set()  # the final-answer tool's calls: the output, not tool events
        self.partial_output: Any = None

    async def __aenter__(self) -> RunStream:
        prompt, output_type, limits, retries = self._args
        # The arguments are checked here, so a bad one raises from `async with`, not from `result()`.
        self._state = state = RunState(self._agent.model, prompt, output_type, limits, retries, "Agent.run_stream")
        self._prompt_id = state.message_id
        self._unsubscribe = self._agent.subscribe(self._on_event)
        run = self._agent.run(state.message, output_type=output_type, limits=limits, output_retries=retries)
        self._task = asyncio.get_running_loop().create_task(run)
        self._task.add_done_callback(lambda _: self._queue.put_nowait(None))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._unsubscribe()
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._task is not None:
            try:
                await self._task
            except (asyncio.CancelledError, RunError):
                pass

    async def __aiter__(self) -> AsyncIterator[RunEvent]:
        while (event := await self._queue.get()) is not None:
            yield event
        self._queue.put_nowait(None)  # iterating again ends at once

    async def result(self) -> RunResult[Any]:
        """The run's `RunResult` once it ended (its `RunError` raised when it failed)."""
        assert self._task is not None, "use `async with agent.run_stream(...) as stream`"
        return await self._task

    def _on_event(self, event: AgentEvent) -> None:
        state = self._state
        if state is None:
            return
        if self._turn is None:
            if event.type == "claimed" and event.message is not None and event.message.id == self._prompt_id:
                self._turn = event.turn
            return
        if event.turn != self._turn:
            return
        if event.type == "delta":
            self._on_chunk(event.data["chunk"])
        elif event.type == "tool_call":
            if state.output_tool is not None and event.data["name"] == state.output_tool.name:
                self._output_calls.add(event.data["call_id"])
            else:
                self._queue.put_nowait(RunEvent("tool_call", call_id=event.data["call_id"], name=event.data["name"]))
        elif event.type == "message" and event.data.get("event_type") == "tool/result" and event.message is not None:
            if event.message.content[0]["tool_call_id"] not in self._output_calls:
                self._queue.put_nowait(RunEvent("tool_result", message=event.message))

    def _on_chunk(self, chunk: Any) -> None:
        state = self._state
        assert state is not None
        if chunk["type"] == "text_delta":
            self._queue.put_nowait(RunEvent("text", text=chunk["text"]))
            if state.native:
                self._grow(chunk["text"])
        elif chunk["type"] == "tool_call_delta" and state.output_tool is not None:
            if chunk.get("name") == state.output_tool.name:
                self._output_index, self._partial = chunk["index"], ""
            if chunk["index"] == self._output_index:
                self._grow(chunk.get("arguments") or "")

    def _grow(self, piece: str) -> None:
        """Parse the output's JSON so far (pydantic-core's partial parser) into `partial_output`."""
        self._partial += piece
        try:
            from pydantic_core import from_json

            document = from_json(self._partial, allow_partial="trailing-strings")
        except (ValueError, TypeError):  # not JSON (yet), or a pydantic-core too old for partial strings
            return
        state = self._state
        assert state is not None and state.spec is not None
        if state.spec.wrapped:
            document = document.get("response") if isinstance(document, dict) else None
        self.partial_output = document
        self._queue.put_nowait(RunEvent("output", output=document))


__all__ = ["RunEvent", "RunStream", "Runs", "prompt_message", "run_sync"]
