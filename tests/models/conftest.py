"""A real HTTP server on 127.0.0.1 that plays scripted chat-completions responses.

`loopback` is a threaded `http.server` (HTTP/1.1, keep-alive, chunked bodies) that answers each
POST with the next scripted `Reply` and records what it received, so tests observe the real bytes
on the wire: retries, request bodies, and whether the client dropped a stalled connection.
`wire` builds recorded-shape SSE bodies (the event shapes DeepSeek / OpenAI / vLLM send).
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

import pytest

STALL_LIMIT = 30.0  # seconds a stalled reply waits for the client at most (then the test failed)


class _NamedServer(ThreadingHTTPServer):
    """A loopback server whose handler errors name the test that started it.

    A handler thread can outlive its test (a keep-alive connection the client closes later, when
    it is collected), so its traceback may print during another test.
    """

    started_in = "?"

    def handle_error(self, request: Any, client_address: Any) -> None:
        sys.stderr.write(f"loopback server started in {self.started_in}: ")
        super().handle_error(request, client_address)


class Stall:
    """Stop sending and wait until the client closes the connection (recorded as a disconnect)."""


class Truncate:
    """Cut the connection here, without ending the body properly."""


@dataclass(frozen=True)
class Trickle:
    """Send `data` every `interval` seconds until the client closes the connection (or the limit)."""

    data: bytes
    interval: float = 0.02


Piece = Union[bytes, Stall, Truncate, Trickle]


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/event-stream"})
    pieces: list[Piece] = field(default_factory=list)
    stall_before_headers: bool = False
    chunked: bool = True  # else: no length, the body ends when the connection closes


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    client: tuple[str, int]  # the client's address: equal for requests on one kept-alive connection

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class LoopbackServer:
    """Serves `replies` in order (one per POST) and records every request in `received`."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.received: list[Received] = []
        self.disconnected = threading.Event()
        self.stalled = threading.Event()
        self.body_bytes_sent: list[int] = []  # per reply played, once it is over
        self._played = threading.Condition()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                with server._lock:
                    server.received.append(Received(self.path, dict(self.headers.items()), body, self.client_address[:2]))
                    reply = server.replies.popleft() if server.replies else Reply(
                        status=500, headers={"Content-Type": "text/plain"}, pieces=[b"no reply scripted"]
                    )
                server._play(self, reply)

        self._server = _NamedServer(("127.0.0.1", 0), Handler)
        self._server.started_in = os.environ.get("PYTEST_CURRENT_TEST", "?")
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="loopback-http", daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def wait_played(self, count: int, timeout: float = STALL_LIMIT) -> list[int]:
        """Wait until `count` replies are over; the body bytes each one managed to send."""
        with self._played:
            if not self._played.wait_for(lambda: len(self.body_bytes_sent) >= count, timeout):
                raise AssertionError(f"only {len(self.body_bytes_sent)} of {count} replies were over after {timeout}s")
            return list(self.body_bytes_sent)

    def reply(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _play(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        sent = [0]
        try:
            self._send(handler, reply, sent)
        finally:
            with self._played:
                self.body_bytes_sent.append(sent[0])
                self._played.notify_all()

    def _send(self, handler: BaseHTTPRequestHandler, reply: Reply, sent: list[int]) -> None:
        if reply.stall_before_headers:
            self._stall(handler)
            handler.close_connection = True
            return
        handler.send_response(reply.status)
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        if reply.chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        try:
            for piece in reply.pieces:
                if isinstance(piece, Stall):
                    handler.wfile.flush()
                    self._stall(handler)
                    handler.close_connection = True
                    return
                if isinstance(piece, Truncate):
                    handler.wfile.flush()
                    handler.close_connection = True
                    return
                if isinstance(piece, Trickle):
                    self._trickle(handler, reply, piece, sent)
                    return
                self._write(handler, reply, piece, sent)
            if reply.chunked:
                handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.disconnected.set()
            handler.close_connection = True

    @staticmethod
    def _write(handler: BaseHTTPRequestHandler, reply: Reply, piece: bytes, sent: list[int]) -> None:
        if reply.chunked:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        else:
            handler.wfile.write(piece)
        handler.wfile.flush()
        sent[0] += len(piece)

    def _trickle(self, handler: BaseHTTPRequestHandler, reply: Reply, trickle: Trickle, sent: list[int]) -> None:
        """Keep the body alive forever, a little at a time; a write failing means the client left."""
        self.stalled.set()
        handler.close_connection = True
        deadline = time.monotonic() + STALL_LIMIT
        while not self._stop.is_set() and time.monotonic() < deadline:
            self._write(handler, reply, trickle.data, sent)  # BrokenPipe/ConnectionReset: see _send
            time.sleep(trickle.interval)

    def _stall(self, handler: BaseHTTPRequestHandler) -> None:
        """Wait until the client closes its end (readable with EOF), the server stops, or the limit."""
        self.stalled.set()
        connection: socket.socket = handler.connection
        waited = 0.0
        while not self._stop.is_set() and waited < STALL_LIMIT:
            readable, _, _ = select.select([connection], [], [], 0.05)
            waited += 0.05
            if readable:
                try:
                    if connection.recv(1, socket.MSG_PEEK) == b"":
                        self.disconnected.set()
                        return
                except OSError:
                    self.disconnected.set()
                    return
                # Data from the client (a pipelined request) is not expected here; keep waiting.


class Wire:
    """Builders for recorded-shape chat-completions SSE bodies (and the reply types)."""

    Reply = Reply
    Stall = Stall
    Truncate = Truncate
    Trickle = Trickle

    @staticmethod
    def event(payload: Any) -> bytes:
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    DONE = b"data: [DONE]\n\n"

    @staticmethod
    def chunk(
        *,
        content: str | None = None,
        reasoning: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        finish: str | None = None,
        role: str | None = None,
        response_id: str = "chatcmpl-1",
    ) -> bytes:
        delta: dict[str, Any] = {}
        if role is not None:
            delta["role"] = role
        if content is not None:
            delta["content"] = content
        if reasoning is not None:
            delta["reasoning_content"] = reasoning
        if tool_calls is not None:
            delta["tool_calls"] = tool_calls
        return Wire.event(
            {
                "id": response_id,
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": "test-model",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
        )

    @staticmethod
    def usage(usage: dict[str, Any], response_id: str = "chatcmpl-1") -> bytes:
        return Wire.event(
            {"id": response_id, "object": "chat.completion.chunk", "model": "test-model", "choices": [], "usage": usage}
        )

    @staticmethod
    def answer(text: str, *, response_id: str = "chatcmpl-1") -> list[bytes]:
        """A plain streamed answer: role, words, stop, usage, [DONE]."""
        words = text.split(" ")
        pieces = [Wire.chunk(role="assistant", content="", response_id=response_id)]
        pieces += [
            Wire.chunk(content=word if i == 0 else " " + word, response_id=response_id) for i, word in enumerate(words)
        ]
        pieces.append(Wire.chunk(finish="stop", response_id=response_id))
        pieces.append(Wire.usage({"prompt_tokens": 10, "completion_tokens": len(words), "total_tokens": 10 + len(words)}))
        pieces.append(Wire.DONE)
        return pieces

    @staticmethod
    def tool_call_start(index: int, call_id: str, name: str) -> dict[str, Any]:
        return {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}

    @staticmethod
    def tool_call_args(index: int, arguments: str) -> dict[str, Any]:
        return {"index": index, "function": {"arguments": arguments}}

    @staticmethod
    def sse_reply(pieces: list[Piece], **options: Any) -> Reply:
        return Reply(pieces=pieces, **options)

    @staticmethod
    def error_reply(status: int, message: str, *, headers: dict[str, str] | None = None, kind: str = "error") -> Reply:
        body = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()
        all_headers = {"Content-Type": "application/json", "x-request-id": f"req-{status}"}
        all_headers.update(headers or {})
        return Reply(status=status, headers=all_headers, pieces=[body])


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    server = LoopbackServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def wire() -> type[Wire]:
    return Wire


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (connections are refused)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def named_event(payload: dict[str, Any]) -> bytes:
    """One SSE event named by its payload's type (how the Messages and Responses APIs send them)."""
    return b"event: " + payload["type"].encode() + b"\ndata: " + json.dumps(payload).encode() + b"\n\n"


class AnthropicWire:
    """Builders for Messages API stream bodies, written from Anthropic's streaming documentation."""

    Reply = Reply
    Stall = Stall
    Truncate = Truncate
    event = staticmethod(named_event)

    @staticmethod
    def message_start(message_id: str = "msg_01", usage: dict[str, Any] | None = None) -> bytes:
        return named_event(
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude-test",
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage
                    or {"input_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1},
                },
            }
        )

    @staticmethod
    def block_start(index: int, block: dict[str, Any]) -> bytes:
        return named_event({"type": "content_block_start", "index": index, "content_block": block})

    @staticmethod
    def delta(index: int, delta: dict[str, Any]) -> bytes:
        return named_event({"type": "content_block_delta", "index": index, "delta": delta})

    @staticmethod
    def block_stop(index: int) -> bytes:
        return named_event({"type": "content_block_stop", "index": index})

    @staticmethod
    def message_delta(stop_reason: str, output_tokens: int = 10) -> bytes:
        return named_event(
            {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}, "usage": {"output_tokens": output_tokens}}
        )

    MESSAGE_STOP = named_event({"type": "message_stop"})
    PING = named_event({"type": "ping"})

    @staticmethod
    def error(kind: str, message: str) -> bytes:
        return named_event({"type": "error", "error": {"type": kind, "message": message}})

    @staticmethod
    def thinking(index: int, pieces: list[str], signature: str) -> list[bytes]:
        return (
            [AnthropicWire.block_start(index, {"type": "thinking", "thinking": "", "signature": ""})]
            + [AnthropicWire.delta(index, {"type": "thinking_delta", "thinking": piece}) for piece in pieces]
            + [AnthropicWire.delta(index, {"type": "signature_delta", "signature": signature}), AnthropicWire.block_stop(index)]
        )

    @staticmethod
    def text(index: int, pieces: list[str]) -> list[bytes]:
        return (
            [AnthropicWire.block_start(index, {"type": "text", "text": ""})]
            + [AnthropicWire.delta(index, {"type": "text_delta", "text": piece}) for piece in pieces]
            + [AnthropicWire.block_stop(index)]
        )

    @staticmethod
    def tool_use(index: int, call_id: str, name: str, pieces: list[str]) -> list[bytes]:
        return (
            [AnthropicWire.block_start(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}})]
            + [AnthropicWire.delta(index, {"type": "input_json_delta", "partial_json": piece}) for piece in pieces]
            + [AnthropicWire.block_stop(index)]
        )

    @staticmethod
    def answer(text: str, *, message_id: str = "msg_01") -> list[bytes]:
        words = text.split(" ")
        pieces = [word if i == 0 else " " + word for i, word in enumerate(words)]
        return [
            AnthropicWire.message_start(message_id),
            *AnthropicWire.text(0, pieces),
            AnthropicWire.message_delta("end_turn", len(words)),
            AnthropicWire.MESSAGE_STOP,
        ]

    @staticmethod
    def sse_reply(pieces: list[Piece], **options: Any) -> Reply:
        return Reply(pieces=pieces, **options)

    @staticmethod
    def error_reply(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Reply:
        body = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
        return Reply(status=status, headers={"Content-Type": "application/json", "request-id": f"req_{status}", **(headers or {})}, pieces=[body])


class ResponsesWire:
    """Builders for Responses API stream bodies, written from OpenAI's streaming documentation."""

    Reply = Reply
    Stall = Stall
    Truncate = Truncate

    def __init__(self, response_id: str = "resp_1") -> None:
        self.response_id = response_id
        self.sequence = 0

    def event(self, payload: dict[str, Any]) -> bytes:
        payload = {**payload, "sequence_number": self.sequence}
        self.sequence += 1
        return named_event(payload)

    def response(self, status: str, **extra: Any) -> dict[str, Any]:
        return {"id": self.response_id, "object": "response", "created_at": 1700000000, "status": status, "model": "gpt-test", "output": [], **extra}

    def created(self) -> list[bytes]:
        return [
            self.event({"type": "response.created", "response": self.response("in_progress")}),
            self.event({"type": "response.in_progress", "response": self.response("in_progress")}),
        ]

    def reasoning(self, index: int, item_id: str, summaries: list[list[str]], encrypted: str | None) -> list[bytes]:
        events = [self.event({"type": "response.output_item.added", "output_index": index, "item": {"type": "reasoning", "id": item_id, "summary": []}})]
        done_summary = []
        for number, pieces in enumerate(summaries):
            part = {"item_id": item_id, "output_index": index, "summary_index": number}
            events.append(self.event({"type": "response.reasoning_summary_part.added", **part, "part": {"type": "summary_text", "text": ""}}))
            events += [self.event({"type": "response.reasoning_summary_text.delta", **part, "delta": piece}) for piece in pieces]
            events.append(self.event({"type": "response.reasoning_summary_text.done", **part, "text": "".join(pieces)}))
            events.append(self.event({"type": "response.reasoning_summary_part.done", **part, "part": {"type": "summary_text", "text": "".join(pieces)}}))
            done_summary.append({"type": "summary_text", "text": "".join(pieces)})
        item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": done_summary}
        if encrypted is not None:
            item["encrypted_content"] = encrypted
        events.append(self.event({"type": "response.output_item.done", "output_index": index, "item": item}))
        return events

    def message(self, index: int, item_id: str, pieces: list[str]) -> list[bytes]:
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        text = "".join(pieces)
        return [
            self.event({"type": "response.output_item.added", "output_index": index, "item": {"type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": []}}),
            self.event({"type": "response.content_part.added", **where, "part": {"type": "output_text", "text": "", "annotations": []}}),
            *[self.event({"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}) for piece in pieces],
            self.event({"type": "response.output_text.done", **where, "text": text, "logprobs": []}),
            self.event({"type": "response.content_part.done", **where, "part": {"type": "output_text", "text": text, "annotations": []}}),
            self.event({"type": "response.output_item.done", "output_index": index, "item": {"type": "message", "id": item_id, "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
        ]

    def function_call(self, index: int, item_id: str, call_id: str, name: str, pieces: list[str]) -> list[bytes]:
        arguments = "".join(pieces)
        item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": "", "status": "in_progress"}
        return [
            self.event({"type": "response.output_item.added", "output_index": index, "item": item}),
            *[self.event({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": index, "delta": piece}) for piece in pieces],
            self.event({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index, "arguments": arguments}),
            self.event({"type": "response.output_item.done", "output_index": index, "item": {**item, "arguments": arguments, "status": "completed"}}),
        ]

    def completed(self, usage: dict[str, Any] | None = None, *, kind: str = "response.completed", **extra: Any) -> bytes:
        usage = usage or {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 12, "output_tokens_details": {"reasoning_tokens": 4}, "total_tokens": 42}
        status = "completed" if kind == "response.completed" else "incomplete"
        return self.event({"type": kind, "response": self.response(status, usage=usage, **extra)})

    def answer(self, text: str) -> list[bytes]:
        words = text.split(" ")
        return [*self.created(), *self.message(0, "msg_a", [w if i == 0 else " " + w for i, w in enumerate(words)]), self.completed()]

    @staticmethod
    def sse_reply(pieces: list[Piece], **options: Any) -> Reply:
        return Reply(pieces=pieces, **options)


@pytest.fixture
def anthropic_wire() -> type[AnthropicWire]:
    return AnthropicWire


@pytest.fixture
def responses_wire() -> type[ResponsesWire]:
    return ResponsesWire
