"""`dshkit bench [FILE.json ...]`: what immutability costs on your own JSON documents.

For each document (a built-in representative one when no file is given) it times dshkit's
operations beside the alternatives that are installed: freezing against `copy.deepcopy`,
`from_json` against `json.loads`/`orjson.loads`, `to_json` against `json.dumps`/`orjson.dumps`,
creating a message against building a plain dict, and minting an id against `uuid.uuid4`. Each
measurement is the median, over `--rounds` rounds, of the time per call (`time.perf_counter`
around a calibrated number of calls). A progress bar goes to standard error on a terminal; the
table goes to standard output. Exit 2 when a file is missing or is not a JSON document dshkit
accepts.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import dshkit

__all__ = ["Measurement", "builtin_document", "load_document", "main", "measurements"]

ROUND_SECONDS = 0.02  # calls per round are calibrated to take about this long
DEFAULT_ROUNDS = 5


@dataclass(frozen=True)
class Measurement:
    """One timed operation: its group (``freeze``, ``parse``, ...), what it calls, and the call."""

    group: str
    label: str
    call: Callable[[], object]


class BadDocument(Exception):
    """A file that is missing, unreadable, not JSON, or JSON that dshkit does not accept."""


def builtin_document() -> Any:
    """A representative agent-harness document: a chat request with tool calls and results."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful assistant working in a repository."}]
    for turn in range(6):
        messages.append({"role": "user", "content": f"Step {turn}: list the files under src/ and summarise the largest."})
        call_id = f"call_{turn:04d}"
        arguments = {"path": "src/", "recursive": True, "limit": 50}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": "list_files", "arguments": json.dumps(arguments)}}
                ],
            }
        )
        listing = [{"name": f"src/module_{n}.py", "size": 1200 + 37 * n, "lines": 40 + n, "binary": False} for n in range(12)]
        messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(listing)})
        messages.append({"role": "assistant", "content": f"The largest file is src/module_11.py ({1200 + 37 * 11} bytes)."})
    tool = {
        "type": "function",
        "function": {
            "name": "list_files",
            "description": "List the files of a folder.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "recursive": {"type": "boolean"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        },
    }
    return {"model": "example-model", "temperature": 0.2, "stream": True, "tools": [tool], "messages": messages}


def load_document(path: str) -> tuple[str, Any]:
    """The text and parsed value of a JSON file; `BadDocument` saying what is wrong and where."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadDocument(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BadDocument(f"{path}: is a directory; give JSON files") from None
    except UnicodeDecodeError as error:
        raise BadDocument(f"{path}: not UTF-8 text (byte {error.start}); give a JSON file") from None
    except OSError as error:
        raise BadDocument(f"{path}: cannot read it: {error.strerror or error}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise BadDocument(f"{path}: not valid JSON: line {error.lineno} column {error.colno}: {error.msg}") from None
    try:
        dshkit.freeze(value)
        dshkit.from_json(text)
    except (TypeError, ValueError) as error:
        raise BadDocument(f"{path}: JSON that dshkit does not accept: {error}") from None
    return text, value


def measurements(text: str, value: Any) -> list[Measurement]:
    """Every operation to time for one document, dshkit's first in each group."""
    frozen = dshkit.freeze(value)
    orjson = _optional("orjson")
    result_text = dshkit.to_json(frozen)
    rows = [
        Measurement("freeze", "dshkit.freeze(value)", lambda: dshkit.freeze(value)),
        Measurement("freeze", "copy.deepcopy(value)", lambda: copy.deepcopy(value)),
        Measurement("freeze", "dshkit.freeze(frozen) (reused)", lambda: dshkit.freeze(frozen)),
        Measurement("parse", "dshkit.from_json(text)", lambda: dshkit.from_json(text)),
        Measurement("parse", "json.loads(text)", lambda: json.loads(text)),
    ]
    if orjson is not None:
        rows.append(Measurement("parse", "orjson.loads(text)", lambda: orjson.loads(text)))
    rows += [
        Measurement("serialise", "dshkit.to_json(frozen)", lambda: dshkit.to_json(frozen)),
        Measurement("serialise", "json.dumps(value)", lambda: json.dumps(value, separators=(",", ":"))),
    ]
    if orjson is not None:
        rows.append(Measurement("serialise", "orjson.dumps(value)", lambda: orjson.dumps(value)))
    rows += [
        Measurement(
            "message", "create_tool_result_message(call, text)", lambda: dshkit.create_tool_result_message("call_1", result_text)
        ),
        Measurement("message", "dict with uuid4 id", lambda: _dict_message(result_text)),
        Measurement("id", "dshkit.new_message_id()", dshkit.new_message_id),
        Measurement("id", "str(uuid.uuid4())", lambda: str(uuid.uuid4())),
    ]
    return rows


def _dict_message(text: str) -> dict[str, Any]:
    content = [{"type": "tool_result", "tool_call_id": "call_1", "content": [{"type": "text", "text": text}], "is_error": False}]
    return {"id": str(uuid.uuid4()), "role": "user", "content": content, "source": {"kind": "tool", "call_id": "call_1"}}


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def time_per_call(call: Callable[[], object], rounds: int) -> float:
    """Median seconds per call over `rounds` rounds of a calibrated number of calls."""
    start = time.perf_counter()
    call()
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(ROUND_SECONDS / once))
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            call()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


class Progress:
    """A one-line progress bar on a terminal; nothing elsewhere."""

    def __init__(self, stream: IO[str], total: int) -> None:
        self.stream = stream
        self.total = total
        self.done = 0
        self.shown = stream.isatty()

    def step(self, label: str) -> None:
        self.done += 1
        if self.shown:
            filled = round(24 * self.done / self.total)
            self.stream.write(f"\r\x1b[K[{'#' * filled}{'.' * (24 - filled)}] {self.done}/{self.total} {label}")
            self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def format_seconds(seconds: float) -> str:
    """A time per call in ns, µs, ms or s, three significant figures."""
    for unit, scale in (("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3)):
        if seconds < scale * 1000:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def table(name: str, text: str, timed: list[tuple[Measurement, float]]) -> list[str]:
    """The report lines for one document: per call time, and relative to dshkit's first row."""
    lines = [f"{name}: {len(text.encode())} bytes of JSON", f"  {'operation':<10} {'implementation':<40} {'per call':>10}  relative"]
    base = 0.0
    group = ""
    for measurement, seconds in timed:
        first = measurement.group != group
        if first:
            group, base = measurement.group, seconds
        shown_group = group if first else ""
        lines.append(f"  {shown_group:<10} {measurement.label:<40} {format_seconds(seconds):>10}  {seconds / base:7.2f}x")
    return lines


def main(args: argparse.Namespace) -> int:
    """Entry point of `dshkit bench`: returns the exit code (2 for a bad file or option)."""
    out, err = sys.stdout, sys.stderr
    rounds = DEFAULT_ROUNDS if args.rounds is None else args.rounds
    if rounds < 1:
        print(f"dshkit bench: --rounds must be at least 1, got {rounds}", file=err)
        return 2
    documents: list[tuple[str, str, Any]] = []
    try:
        for path in args.files:
            text, value = load_document(path)
            documents.append((path, text, value))
    except BadDocument as error:
        print(f"dshkit bench: {error}", file=err)
        return 2
    if not documents:
        value = builtin_document()
        documents.append(("built-in document (a chat request with tool calls)", json.dumps(value), value))
    plans = [(name, text, measurements(text, value)) for name, text, value in documents]
    progress = Progress(err, sum(len(rows) for _, _, rows in plans))
    reports = []
    try:
        for name, text, rows in plans:
            timed = []
            for row in rows:
                progress.step(row.label)
                timed.append((row, time_per_call(row.call, rounds)))
            reports.append(table(name, text, timed))
    finally:
        progress.close()
    for index, lines in enumerate(reports):
        if index:
            print(file=out)
        print("\n".join(lines), file=out)
    missing = [name for name in ("orjson",) if _optional(name) is None]
    print(f"\nmedian of {rounds} rounds per row; relative: time / the first row of its operation", file=out)
    if missing:
        print(f"not installed (not compared): {', '.join(missing)}", file=out)
    return 0
