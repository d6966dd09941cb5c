"""Stream assembly: protocol chunks in, content blocks of one assistant response out.

Rules (the ones a re-implementation most easily gets wrong):

- blocks come out in first-seen order: one reasoning block, one text block, one block per tool
  call index (in the order each kind/index first appeared);
- tool-call argument fragments concatenate; the first non-empty id and name of a call win (a
  repeated "start" with another id or name is ignored); a call that never got an id is named
  ``call-<index>``;
- the finish chunk ends every block: chunks after it are ignored;
- no finish chunk at all means a normal stop;
- a ``max_tokens`` finish drops every tool call, complete or not;
- a completed response whose tool call could not be sent back to a model (no name, an id
  another call of the response has, or arguments nested deeper than `MAX_SENDABLE_DEPTH`, which
  a projection that parses them, Anthropic's, could not rebuild) is refused: `final_content`
  raises `MalformedResponseError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dshkit.agent._tools.validation import MAX_SENDABLE_DEPTH, nests_deeper_than
from dshkit.models.errors import MalformedResponseError
from dshkit.models.protocol import FINISH_REASONS, ModelError


class _ToolCallBlock:
    __slots__ = ("arguments", "id", "index", "name")

    def __init__(self, index: int) -> None:
        self.index = index
        self.id: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []


class StreamAssembler:
    """Folds the chunks of one model response into content blocks, usage and finish facts."""

    __slots__ = ("_order", "_reasoning", "_text", "_tool_calls", "error", "finish_reason", "finished", "replay_state", "usage")

    def __init__(self) -> None:
        self._order: list[object] = []  # "text", "reasoning" or a _ToolCallBlock
        self._text: list[str] | None = None
        self._reasoning: list[str] | None = None
        self._tool_calls: dict[int, _ToolCallBlock] = {}
        self.usage: dict[str, Any] | None = None
        self.finished = False
        self.finish_reason: str = "stop"
        self.replay_state: Any = None
        self.error: Mapping[str, Any] | None = None

    def add(self, chunk: object) -> bool:
        """Fold one chunk in; returns False when it was ignored (after the finish).

        A chunk that does not follow the protocol raises `ModelError` (code ``"bad_chunk"``)
        naming what was wrong.
        """
        if self.finished:
            return False
        if type(chunk) is not dict and not isinstance(chunk, Mapping):
            raise ModelError(f"model stream: expected a chunk mapping, got {type(chunk).__name__}", code="bad_chunk")
        kind = chunk.get("type")
        if kind == "text_delta" or kind == "reasoning_delta":
            text = chunk.get("text")
            if not isinstance(text, str):
                raise ModelError(f"model stream: {kind} chunk needs a str 'text', got {text!r}", code="bad_chunk")
            if kind == "text_delta":
                if self._text is None:
                    self._text = []
                    self._order.append("text")
                self._text.append(text)
            else:
                if self._reasoning is None:
                    self._reasoning = []
                    self._order.append("reasoning")
                self._reasoning.append(text)
        elif kind == "tool_call_delta":
            self._add_tool_call_delta(chunk)
        elif kind == "usage":
            usage = chunk.get("usage")
            if type(usage) is not dict and not isinstance(usage, Mapping):
                raise ModelError(f"model stream: usage chunk needs a mapping 'usage', got {usage!r}", code="bad_chunk")
            # Providers report usage once or cumulatively: later values win key by key.
            self.usage = {**(self.usage or {}), **usage}
        elif kind == "finish":
            self._finish(chunk)
        else:
            raise ModelError(f"model stream: unknown chunk type {kind!r}", code="bad_chunk")
        return True

    def _add_tool_call_delta(self, chunk: Mapping[str, Any]) -> None:
        index = chunk.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ModelError(f"model stream: tool_call_delta needs an int 'index' >= 0, got {index!r}", code="bad_chunk")
        call_id, name, arguments = chunk.get("id"), chunk.get("name"), chunk.get("arguments", "")
        if call_id is not None and not isinstance(call_id, str):
            raise ModelError(f"model stream: tool_call_delta 'id' must be a str or None, got {call_id!r}", code="bad_chunk")
        if name is not None and not isinstance(name, str):
            raise ModelError(f"model stream: tool_call_delta 'name' must be a str or None, got {name!r}", code="bad_chunk")
        if arguments is None:
            arguments = ""
        if not isinstance(arguments, str):
            raise ModelError(
                f"model stream: tool_call_delta 'arguments' must be a str (raw JSON text), got {arguments!r}",
                code="bad_chunk",
            )
        block = self._tool_calls.get(index)
        if block is None:
            block = self._tool_calls[index] = _ToolCallBlock(index)
            self._order.append(block)
        if call_id and block.id is None:
            block.id = call_id
        if name and block.name is None:
            block.name = name
        if arguments:
            block.arguments.append(arguments)

    def _finish(self, chunk: Mapping[str, Any]) -> None:
        self.finished = True
        reason = chunk.get("reason")
        if "replay_state" in chunk:
            self.replay_state = chunk["replay_state"]
        if reason in FINISH_REASONS:
            self.finish_reason = reason
            if reason == "error":
                error = chunk.get("error")
                self.error = error if isinstance(error, Mapping) else {"code": "model_error", "message": str(error or "model error")}
            return
        # A provider that reports its own stream as aborted failed; it was not cancelled by us.
        code = "ABORTED" if reason == "aborted" else "bad_finish"
        self.finish_reason = "error"
        self.error = {"code": code, "message": f"model stream finished with reason {reason!r}"}

    @property
    def has_visible_prefix(self) -> bool:
        """True when some non-whitespace text or reasoning was streamed."""
        return any(part.strip() for part in self._text or ()) or any(part.strip() for part in self._reasoning or ())

    def content(self, *, tool_calls: bool = True) -> list[dict[str, Any]]:
        """The response's content blocks, in first-seen order (tool calls optional)."""
        blocks: list[dict[str, Any]] = []
        for entry in self._order:
            if entry == "text":
                blocks.append({"type": "text", "text": "".join(self._text or ())})
            elif entry == "reasoning":
                blocks.append({"type": "reasoning", "text": "".join(self._reasoning or ())})
            elif tool_calls and isinstance(entry, _ToolCallBlock):
                blocks.append(
                    {
                        "type": "tool_call",
                        "id": entry.id or f"call-{entry.index}",
                        "name": entry.name or "",
                        "arguments": "".join(entry.arguments),
                    }
                )
        return blocks

    def final_content(self) -> list[dict[str, Any]]:
        """The content of a completed response (a max-tokens stop keeps no tool call).

        Raises `MalformedResponseError` when a tool call has no name, repeats the id of another
        call or nests its arguments too deep: logged, such a message would make every later
        request unsendable.
        """
        if self.finish_reason == "max_tokens":
            return self.content(tool_calls=False)
        if self._tool_calls:
            self._check_tool_calls()
        return self.content()

    def _check_tool_calls(self) -> None:
        ids: set[str] = set()
        for entry in self._tool_calls.values():  # first-seen order, as in `_order`
            call_id = entry.id or f"call-{entry.index}"
            if not entry.name:
                raise MalformedResponseError(
                    f"model response: tool call {entry.index} (id {call_id!r}) has no name; "
                    "a call without a name could never be sent back to the model"
                )
            deep_enough = sum(map(len, entry.arguments)) > 2 * MAX_SENDABLE_DEPTH  # shorter text cannot nest that deep
            if deep_enough and nests_deeper_than("".join(entry.arguments), MAX_SENDABLE_DEPTH):
                raise MalformedResponseError(
                    f"model response: tool call {entry.index} (id {call_id!r}) has arguments nested deeper than "
                    f"{MAX_SENDABLE_DEPTH} levels, which could never be sent back to the model"
                )
            if call_id in ids:
                named = " (the id it was given for having none)" if entry.id is None else ""
                raise MalformedResponseError(
                    f"model response: tool call {entry.index} repeats call id {call_id!r}{named} of an earlier call"
                )
            ids.add(call_id)

    def prefix_content(self) -> list[dict[str, Any]]:
        """The text and reasoning streamed so far (for an interrupted response)."""
        return self.content(tool_calls=False)


__all__ = ["StreamAssembler"]
