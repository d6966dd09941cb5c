"""Server-sent events: an incremental decoder from response bytes to events.

Follows the WHATWG "event stream" interpretation rules: lines end in CRLF, LF or CR (a CR at the
end of one network read may be the first half of a CRLF split across reads); a line starting with
``:`` is a comment; ``field: value`` loses one leading space of the value; ``data`` lines of one
event are joined with ``\\n``; a blank line dispatches the event; a leading byte-order mark is
dropped; an event left without its terminating blank line when the stream ends is discarded.

The body must be UTF-8: invalid bytes raise `SSEDecodeError` naming the byte offset, because a
stream that is not text is not an event stream (a proxy's binary error page, a wrong endpoint).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = ["SSEDecodeError", "SSEDecoder", "ServerSentEvent"]


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched event: its type (``"message"`` unless named), data, last id and retry."""

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


class SSEDecodeError(ValueError):
    """The byte stream is not valid UTF-8 text (so it cannot be an event stream)."""


class SSEDecoder:
    """Feed response bytes as they arrive; collect the events each read completes."""

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._bytes_seen = 0
        self._at_start = True
        self._pending = ""  # an unterminated line
        self._skip_lf = False  # the previous read ended in CR: a leading LF belongs to it
        self._event_type = ""
        self._data: list[str] = []
        self._has_data = False
        self._last_id = ""
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode one read of the body and return the events it completed (maybe none)."""
        try:
            text = self._text.decode(chunk)
        except UnicodeDecodeError as error:
            raise SSEDecodeError(
                f"event stream is not UTF-8: invalid byte at offset "
                f"{self._bytes_seen + error.start} ({chunk[error.start:error.start + 8]!r})"
            ) from None
        self._bytes_seen += len(chunk)
        return self._feed_text(text)

    def close(self) -> list[ServerSentEvent]:
        """The stream ended: fail on a truncated UTF-8 sequence, dispatch a final line.

        A last line without its line ending is interpreted, but an event still missing its blank
        line is discarded, as the standard says; callers detect a truncated stream from the
        absence of the events they expected.
        """
        try:
            text = self._text.decode(b"", final=True)
        except UnicodeDecodeError:
            raise SSEDecodeError(
                f"event stream is not UTF-8: truncated character at offset {self._bytes_seen}"
            ) from None
        events = self._feed_text(text)
        if self._pending:
            self._interpret_line(self._pending)
            self._pending = ""
        return events

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        if not text:
            return []
        if self._at_start:
            self._at_start = False
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        if "\r" in text:
            # A CR ending this read may be the first half of a CRLF: the LF is dropped next time.
            self._skip_lf = text.endswith("\r")
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        if self._pending:
            lines[0] = self._pending + lines[0]
        self._pending = lines.pop()  # the text after the last line ending (maybe "")
        events: list[ServerSentEvent] = []
        for line in lines:
            event = self._interpret_line(line)
            if event is not None:
                events.append(event)
        return events

    def _interpret_line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None
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
        return None

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
