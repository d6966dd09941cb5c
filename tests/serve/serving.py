"""Processes and clients for the serve tests: `dshkit serve` / `dshkit worker` started for real
on loopback, an SSE reader, and the checks every served log must pass."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from support import DSHKIT_PATH

HERE = str(Path(__file__).resolve().parent)
TOKENS = "t-alice=alice,t-bob=bob,t-carol=carol"
PATIENCE = 120.0


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([DSHKIT_PATH, HERE])
    env["DSHKIT_SERVE_TOKENS"] = TOKENS
    env.update(extra)
    return env


class Process:
    """A `dshkit serve|worker` child; `url` once an API process announced its port."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.argv, self.env, self.log_path = argv, env, log
        self.url: str | None = None
        self.start()

    def start(self) -> None:
        self._log = open(self.log_path, "ab")
        self.popen = subprocess.Popen([sys.executable, "-m", "dshkit", *self.argv], env=self.env,
                                      stdout=subprocess.PIPE, stderr=self._log)
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline().decode()
        if not line.startswith(("dshkit serve: listening on ", "dshkit worker: running")):
            self.popen.kill()
            self.popen.wait(30)
            self._close_files()
            raise AssertionError(f"{self.argv} did not start: {line!r}\n{self.log_path.read_text()}")
        if line.startswith("dshkit serve"):
            self.url = line.rsplit(" ", 1)[1].strip()

    def kill(self) -> None:
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(30)
        self._close_files()

    def _close_files(self) -> None:
        assert self.popen.stdout is not None
        self.popen.stdout.close()
        self._log.close()

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(30)
        self._close_files()


def serve(store: str, log: Path, *extra: str, env: dict[str, str] | None = None) -> Process:
    return Process(["serve", "served_agents:AGENTS", "--store", store, "--port", "0", *extra], env or child_env(), log)


def worker(store: str, log: Path, *extra: str, env: dict[str, str] | None = None) -> Process:
    return Process(["worker", "served_agents:AGENTS", "--store", store, *extra], env or child_env(), log)


def client(url: str, token: str = "t-alice") -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60.0)


def read_sse(http: httpx.Client, path: str, stop: Callable[[list[tuple[str, dict[str, Any]]]], bool],
             last_event_id: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(id, AG-UI event) pairs of the stream until `stop(events)` holds (or PATIENCE runs out)."""
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    events: list[tuple[str, dict[str, Any]]] = []
    deadline = time.monotonic() + PATIENCE
    with http.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, response.read()
        event_id = None
        for line in response.iter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                assert event_id is not None
                events.append((event_id, json.loads(line[6:])))
                if stop(events):
                    return events
            if time.monotonic() > deadline:
                raise AssertionError(f"the stream did not reach its end in {PATIENCE} s: {events[-5:]}")
    raise AssertionError(f"the stream closed early: {events[-5:]}")


def wait_for(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + PATIENCE
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def log_events(http: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    response = http.get(f"/sessions/{session_id}/log")
    assert response.status_code == 200, response.text
    return response.json()["events"]  # type: ignore[no-any-return]


def answers_of(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each person's message id -> the final answers given to it (texts of assistant messages that
    end a completed turn, up to the next person's message)."""
    answers: dict[str, list[str]] = {}
    current = None
    last_text = None
    for event in events:
        data = event["data"]
        if event["type"] == "user/message" and data["message"]["source"]["kind"] == "user":
            current = data["message"]["id"]
            answers.setdefault(current, [])
        elif event["type"] == "assistant/message":
            texts = [b["text"] for b in data["message"]["content"] if b["type"] == "text"]
            last_text = "".join(texts) or None
        elif event["type"] == "turn/end" and data["reason"]["kind"] == "completed" and current is not None:
            assert last_text is not None, event
            answers[current].append(last_text)
            last_text = None
    return answers


def run_ids(events: list[tuple[str, dict[str, Any]]]) -> Iterator[str]:
    return (event_id for event_id, _ in events)
