"""Server-sent events: an incremental decoder from response bytes to events.

Follows the WHATWG "event stream" interpretation rules: lines end in CRLF, LF or CR (a CR at the
end of one network read may be the first half of a CRLF split across reads); a line starting with
``:`` is a comment; ``field: value`` loses one leading space of the value; ``data`` lines of one
event are joined with ``\\n``; a blank line dispatches the event; a leading byte-order mark is
dropped; an event left without its terminating blank line when the stream ends is discarded.

The body must be UTF-8: invalid bytes raise `SSEDecodeError` naming the byte offset, because a
stream that is not text is not an event stream (a proxy's binary error page, a wrong endpoint).

Time and memory are linear in the body: only the bytes of each new read are searched for a line
end, and an unterminated line is kept as its pieces, joined once when its end arrives. One event
(its lines up to the blank line that ends it, comments included) may hold at most
`max_event_bytes`; past that `SSEEventTooLargeError` is raised at once, without waiting for the
line to end (a server streaming one endless line would otherwise exhaust memory).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "SSEDecodeError", "SSEDecoder", "SSEEventTooLargeError", "ServerSentEvent"]

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
_LF = 0x0A
_CR = 0x0D


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched event: its type (``"message"`` unless named), data, last id and retry."""

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


class SSEDecodeError(ValueError):
    """The byte stream is not an event stream the decoder accepts (not UTF-8, an event too large)."""


class SSEEventTooLargeError(SSEDecodeError):
    """One event is larger than the decoder's `max_event_bytes` (`limit`); `offset` is how many
    bytes of the stream had been read when that was found."""

    def __init__(self, limit: int, offset: int) -> None:
        super().__init__(
            f"an event is larger than the limit of {limit} bytes (max_event_bytes), "
            f"{offset} bytes into the stream"
        )
        self.limit = limit
        self.offset = offset


def check_max_event_bytes(owner: str, value: object) -> int:
    """`value` if it is a valid `max_event_bytes` (an int >= 1), else a `ValueError` naming `owner`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner} max_event_bytes: expected an int >= 1, got {value!r}")
    return value


class SSEDecoder:
    """Feed response bytes as they arrive; collect the events each read completes."""

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._limit = check_max_event_bytes("SSEDecoder", max_event_bytes)
        self._bytes_seen = 0
        self._at_start = True
        self._pending: list[bytes] = []  # the pieces of an unterminated line
        self._pending_size = 0
        self._event_size = 0  # bytes of the complete lines since the last blank line
        self._skip_lf = False  # the previous read ended in CR: a leading LF belongs to it
        self._event_type = ""
        self._data: list[str] = []
        self._has_data = False
        self._last_id = ""
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode one read of the body and return the events it completed (maybe none)."""
        offset = self._bytes_seen
        self._bytes_seen += len(chunk)
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[0] == _LF:
                chunk = chunk[1:]
                offset += 1
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if end < 0:
            if chunk:
                self._pending.append(chunk)
                self._pending_size += len(chunk)
                self._check_size(self._event_size + self._pending_size, self._bytes_seen)
            return []
        block_offset = offset - self._pending_size
        if self._pending:
            self._pending.append(chunk[: end + 1])
            block = b"".join(self._pending)
        else:
            block = chunk if end + 1 == len(chunk) else chunk[: end + 1]
        rest = chunk[end + 1 :]
        self._pending = [rest] if rest else []
        self._pending_size = len(rest)
        # A CR ending this read may be the first half of a CRLF: the LF is dropped next time.
        self._skip_lf = not rest and chunk[end] == _CR
        events = self._feed_lines(block, block_offset)
        if rest:
            self._check_size(self._event_size + self._pending_size, self._bytes_seen)
        return events

    def close(self) -> list[ServerSentEvent]:
        """The stream ended: fail on a truncated UTF-8 sequence, dispatch a final line.

        A last line without its line ending is interpreted, but an event still missing its blank
        line is discarded, as the standard says; callers detect a truncated stream from the
        absence of the events they expected.
        """
        if not self._pending:
            return []
        line = b"".join(self._pending)
        self._pending, self._pending_size = [], 0
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as error:
            if error.reason == "unexpected end of data":
                raise SSEDecodeError(
                    f"event stream is not UTF-8: truncated character at offset {self._bytes_seen}"
                ) from None
            raise self._invalid_byte(line, self._bytes_seen - len(line)) from None
        text = self._without_bom(text)
        if text:
            self._interpret_line(text)
        return []

    def _feed_lines(self, block: bytes, offset: int) -> list[ServerSentEvent]:
        """Interpret `block`, whole lines each ending in a line ending, starting at byte `offset`."""
        lines = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in block else block
        if self._event_size + len(lines) <= self._limit:
            # No event can exceed the limit in this block: decode it in one piece.
            try:
                text = lines.decode("utf-8")
            except UnicodeDecodeError:
                raise self._invalid_byte(block, offset) from None
            blank = lines.rfind(b"\n\n")
            if blank >= 0:
                self._event_size = len(lines) - blank - 2
            elif lines[0] == _LF:
                self._event_size = len(lines) - 1
            else:
                self._event_size += len(lines)
            return self._interpret_lines(text.split("\n"))
        texts: list[str] = []
        pieces = lines.split(b"\n")
        pieces.pop()  # the empty text after the last line ending
        for line in pieces:
            # Near the limit: count line by line, so the event that crosses it is the one refused.
            self._event_size = self._event_size + len(line) + 1 if line else 0
            self._check_size(self._event_size, self._bytes_seen)
            try:
                texts.append(line.decode("utf-8"))
            except UnicodeDecodeError:
                raise self._invalid_byte(block, offset) from None
        texts.append("")
        return self._interpret_lines(texts)

    def _interpret_lines(self, lines: list[str]) -> list[ServerSentEvent]:
        """Interpret whole lines; the last item is the empty text after the last line ending."""
        lines.pop()
        if self._at_start:
            self._at_start = False
            if lines and lines[0].startswith("\ufeff"):
                lines[0] = lines[0][1:]
        events: list[ServerSentEvent] = []
        for line in lines:
            if line:
                self._interpret_line(line)
                continue
            event = self._dispatch()
            if event is not None:
                events.append(event)
        return events

    def _without_bom(self, text: str) -> str:
        if self._at_start:
            self._at_start = False
            if text.startswith("\ufeff"):
                return text[1:]
        return text

    def _check_size(self, size: int, offset: int) -> None:
        if size > self._limit:
            raise SSEEventTooLargeError(self._limit, offset)

    @staticmethod
    def _invalid_byte(raw: bytes, offset: int) -> SSEDecodeError:
        """The error for the first invalid byte of `raw` (which starts at stream byte `offset`)."""
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as error:
            start = error.start
        else:  # pragma: no cover - only called when decoding failed
            start = 0
        return SSEDecodeError(
            f"event stream is not UTF-8: invalid byte at offset {offset + start} ({raw[start:start + 8]!r})"
        )

    def _interpret_line(self, line: str) -> None:
        if line[0] == ":":
            return
        if line.startswith("data:"):  # the common case, with one copy of the value instead of two
            self._data.append(line[6:] if line.startswith(" ", 5) else line[5:])
            self._has_data = True
            return
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._has_data = True
        elif field == "event":
            self._event_type = value
        elif field == "id":
            if "\0" not in value:
                self._last_id = value
        elif field == "retry":
            if value.isascii() and value.isdigit():
                self._retry = int(value)
        # Any other field is ignored, as the standard requires.

    def _dispatch(self) -> ServerSentEvent | None:
        event_type, self._event_type = self._event_type, ""
        if not self._has_data:
            return None
        data = "\n".join(self._data)
        self._data = []
        self._has_data = False
        return ServerSentEvent(
            event=event_type or "message", data=data, id=self._last_id, retry=self._retry
        )
