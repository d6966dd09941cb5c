"""`RunResult`: what a run (one turn) did, read from the durable log.

Everything but the live run's already validated output is derived from the events between the
turn's ``turn/start`` and ``turn/end``, so `RunResult.from_log` on a re-opened log gives the same
messages, usage, status and (validated again from the logged answer) output. The fields are
read lazily: a run that only wants `output` pays for nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from dshkit.agent.errors import RunError, run_error
from dshkit.agent._run.output import OutputSpec, output_spec
from dshkit.agent._run.state import ACCEPTED, MISSING
from dshkit.agent._run.usage import RunUsage, run_usage
from dshkit.llm import Message
from dshkit.session.events import ASSISTANT_MESSAGE, REQUEST_HEADER, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START

if TYPE_CHECKING:
    from dshkit.session import Session


OutputT = TypeVar("OutputT")


class RunResult(Generic[OutputT]):
    """The outcome of the turn that ran a prompt: `status`, `output`, `message`, `messages`, `usage`, `seqs`.

    `status` is the turn's end kind (``"completed"``, ``"max_tokens"``, ``"error"``, ``"aborted"``,
    ``"blocked"``); `error` the `RunError` it stands for (None on success), which `Agent.run` raises.
    `output` is the validated structured output, or the final answer's text when no output type was
    asked for.
    """

    # Slots and values computed on first read: `run` makes one per call (benches/bench_run.py).
    __slots__ = ("_error", "_message", "_messages", "_output", "_reason", "_spec", "_start_seq", "_usage", "end_seq", "session", "turn")
    _error: RunError | None
    _message: Message | None
    _messages: tuple[Message, ...]
    _output: Any
    _reason: Mapping[str, Any]
    _start_seq: int
    _usage: RunUsage

    def __init__(
        self, session: Session, turn: int, end_seq: int, *, output: Any = MISSING, spec: OutputSpec | None = None
    ) -> None:
        self.session = session
        self.turn = turn
        self.end_seq = end_seq
        self._output = output
        self._spec = spec

    @classmethod
    def from_log(cls, session: Session, turn: int | None = None, *, output_type: Any = None) -> RunResult[Any]:
        """The result of turn `turn` (the latest ended turn by default) as the log records it."""
        events = session.events
        for seq in range(len(events) - 1, -1, -1):
            event = events[seq]
            if event.type == TURN_END and (turn is None or event.data["turn"] == turn):
                spec = None if output_type is None or output_type is str else output_spec(output_type, _logged_output_name(session, seq))
                return cls(session, event.data["turn"], seq, spec=spec)
        raise LookupError(f"the log has no ended turn {turn}" if turn is not None else "the log has no ended turn")

    @property
    def reason(self) -> Mapping[str, Any]:
        """The logged ``turn/end`` reason."""
        try:
            return self._reason
        except AttributeError:
            self._reason = value = self._find_reason()
            return value

    def _find_reason(self) -> Mapping[str, Any]:
        return self.session.events[self.end_seq].data["reason"]  # type: ignore[no-any-return]

    @property
    def status(self) -> str:
        """``"completed"``, ``"max_tokens"``, ``"error"``, ``"aborted"`` or ``"blocked"``."""
        return str(self.reason["kind"])

    @property
    def start_seq(self) -> int:
        """The seq of the turn's ``turn/start``."""
        try:
            return self._start_seq
        except AttributeError:
            self._start_seq = value = self._find_start_seq()
            return value

    def _find_start_seq(self) -> int:
        events = self.session.events
        for seq in range(self.end_seq - 1, -1, -1):
            event = events[seq]
            if event.type == TURN_START and event.data["turn"] == self.turn:
                return seq
        raise LookupError(f"turn {self.turn} has no turn/start in the log")

    @property
    def seqs(self) -> range:
        """The seqs of the turn's events, ``turn/start`` to ``turn/end`` inclusive."""
        return range(self.start_seq, self.end_seq + 1)

    @property
    def error(self) -> RunError | None:
        """The typed error of a turn that did not succeed (what `Agent.run` raises), else None."""
        try:
            return self._error
        except AttributeError:
            self._error = value = self._find_error()
            return value

    def _find_error(self) -> RunError | None:
        return run_error(self.reason, self)

    @property
    def messages(self) -> tuple[Message, ...]:
        """The run's messages in log order: its prompt, the answers, tool results and retry prompts."""
        try:
            return self._messages
        except AttributeError:
            self._messages = value = self._find_messages()
            return value

    def _find_messages(self) -> tuple[Message, ...]:
        events = self.session.events
        return tuple(
            message for message in (events[seq].message for seq in range(self.start_seq, self.end_seq)) if message is not None
        )

    @property
    def message_ids(self) -> tuple[str, ...]:
        """The ids of `messages`."""
        return tuple(message.id for message in self.messages)

    @property
    def message(self) -> Message | None:
        """The last assistant message of the run (None when the model never answered)."""
        try:
            return self._message
        except AttributeError:
            self._message = value = self._find_message()
            return value

    def _find_message(self) -> Message | None:
        return next((message for message in reversed(self.messages) if message.role == "assistant"), None)

    @property
    def output(self) -> OutputT:
        """The validated output (its `output_type`), or the final answer's text without one."""
        value = self._output
        if value is MISSING:
            self._output = value = self._find_output()
        return value  # type: ignore[no-any-return]

    def _find_output(self) -> OutputT:
        if self._spec is None:
            return self.message.text if self.message is not None else None  # type: ignore[return-value]
        return _logged_output(self.session, self.seqs, self._spec)  # type: ignore[no-any-return]

    @property
    def usage(self) -> RunUsage:
        """The run's `RunUsage`, summed over its answered requests."""
        try:
            return self._usage
        except AttributeError:
            self._usage = value = self._find_usage()
            return value

    def _find_usage(self) -> RunUsage:
        return run_usage(self.session, self.seqs, self._spec.name if self._spec is not None else None)

    def __repr__(self) -> str:
        return f"RunResult(turn={self.turn}, status={self.status!r}, output={self.output!r})"


def _logged_output_name(session: Session, end_seq: int) -> str:
    """The output name the latest header before `end_seq` asked for (the default when none did)."""
    events = session.events
    for seq in range(end_seq, -1, -1):
        if events[seq].type == REQUEST_HEADER:
            entry = events[seq].data["header"]["config"].get("output_schema")
            return str(entry["name"]) if entry is not None else "final_result"
    return "final_result"


def _logged_output(session: Session, seqs: range, spec: OutputSpec) -> Any:
    """The output the log records: the accepted final-tool call's arguments, else the last answer's JSON."""
    events = session.events
    arguments: dict[str, str] = {}
    last_text: str | None = None
    for seq in seqs:
        event = events[seq]
        if event.type == TOOL_CALL and event.data["name"] == spec.name:
            arguments[event.data["call_id"]] = event.data["arguments"]
        elif event.type == TOOL_RESULT:
            block = event.data["message"].content[0]
            accepted = not block.get("is_error") and tuple(part.get("text") for part in block["content"]) == (ACCEPTED,)
            if block["tool_call_id"] in arguments and accepted:
                value, _ = spec.check_arguments(json.loads(arguments[block["tool_call_id"]] or "{}"))
                return value
        elif event.type == ASSISTANT_MESSAGE and not event.data["message"].tool_calls:
            last_text = event.data["message"].text
    if last_text is None:
        return None
    value, problems = spec.check_text(last_text)
    return None if problems else value


__all__ = ["RunResult"]
