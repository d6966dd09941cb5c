"""Checking a tool call's arguments before its body runs: the JSON text, then the tool's schema.

`parse_arguments` turns the text the model wrote into the object a body gets, or says why it is
not one: not JSON (NaN and infinities are not JSON numbers, and a number too big for a float is
refused, not made infinite), not an object, or nested deeper than `MAX_ARGUMENT_DEPTH` (checked
before parsing, so no depth reaches Python's recursion limit).

The schema validator is `jsonschema-rs` (a dependency of dshkit): a compiled validator per tool,
about a microsecond per call for a typical schema (benches/bench_tools.py measures it beside the
pure-Python `jsonschema`). It holds the GIL while it runs, so a worker thread would not free the
event loop: its work is bounded instead.

- Failing paths are listed (the first `_MAX_ERRORS`) only for arguments up to
  `_LISTED_ERRORS_BUDGET` characters, since the library's error iterator builds every error before
  it yields one; larger arguments report their first failing path.
- A schema whose regular expressions all compile for the linear-time engine (`pattern`,
  `patternProperties` without lookaround or backreferences) is checked on the loop: its time grows
  with the arguments' size, never exponentially.
- A schema with backtracking patterns (e.g. an MCP server's) may take seconds per string: each match
  gets a step budget (`BACKTRACK_LIMIT`), and arguments over `_IN_PROCESS_BUDGET` characters are
  checked in a child process, off the loop, killed after `VALIDATION_SECONDS` (`check_off_loop`),
  so the loop, timeouts and cancels go on meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import subprocess
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dshkit.llm import thaw, to_json

if TYPE_CHECKING:
    from dshkit.agent.cancel import CancelToken

_log = logging.getLogger("dshkit.agent")

MAX_ARGUMENT_DEPTH = 256  # what a frozen value holds: hooks and policies see the arguments frozen
MAX_SENDABLE_DEPTH = 512  # deeper, a call could not be rebuilt into a request (`StreamAssembler` refuses it)
BACKTRACK_LIMIT = 10_000  # steps one regex match of a schema may backtrack (fancy-regex's default: 1,000,000)
VALIDATION_SECONDS = 5.0  # what a schema with backtracking patterns may take on large arguments, off the loop
_IN_PROCESS_BUDGET = 1024  # argument characters such a schema is checked for on the loop (milliseconds at worst)
_MAX_ERRORS = 20  # a model that writes a wholly wrong object gets the first ones, not a flood
_LISTED_ERRORS_BUDGET = 16 * 1024  # argument characters up to which every failing path is listed
_MAX_VALUE_CHARS = 120
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


class SchemaError(ValueError):
    """A tool's `parameters` is not a valid JSON schema."""


class InvalidArgumentsText(ValueError):
    """A call's argument text is not a JSON object dshkit takes; the message says why, for the model."""


def nests_deeper_than(text: str, limit: int) -> bool:
    """Whether the JSON text nests arrays/objects deeper than `limit` (strings do not count)."""
    if text.count("[") + text.count("{") <= limit:
        return False  # the usual answer, at C speed
    depth = 0
    for bracket in _BRACKETS.finditer(_STRINGS.sub('""', text)):
        if bracket.group() in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _not_a_number(name: str) -> Any:
    raise InvalidArgumentsText(f"not JSON ({name} is not a JSON number)")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise InvalidArgumentsText(f"the number {text[:40]} is too large for a float")
    return value


_DECODER = json.JSONDecoder(parse_constant=_not_a_number, parse_float=_finite_float)


def parse_arguments(raw: str) -> dict[str, Any]:
    """The JSON object `raw` holds; `InvalidArgumentsText` saying why not (see the module doc)."""
    if raw == "{}":
        return {}  # a call without arguments, the most common: no parser
    if not raw.strip():
        return {}
    if len(raw) > 2 * MAX_ARGUMENT_DEPTH and nests_deeper_than(raw, MAX_ARGUMENT_DEPTH):  # shorter text cannot be
        raise InvalidArgumentsText(f"nested deeper than {MAX_ARGUMENT_DEPTH} levels")
    try:
        arguments = _DECODER.decode(raw)
    except RecursionError:  # only on a stack already deep: the depth was checked above
        raise InvalidArgumentsText(f"nested deeper than {MAX_ARGUMENT_DEPTH} levels") from None
    except InvalidArgumentsText:
        raise
    except ValueError as exc:
        raise InvalidArgumentsText(f"not JSON ({exc})") from None
    if not isinstance(arguments, dict):
        raise InvalidArgumentsText(f"expected a JSON object, got {type(arguments).__name__}")
    return arguments


def _validator_module() -> Any:
    try:
        import jsonschema_rs
    except ImportError as exc:  # pragma: no cover - a dependency of dshkit; only a broken install lacks it
        raise ImportError(
            "dshkit validates tool arguments with jsonschema-rs, which is missing: pip install 'jsonschema-rs>=0.20'"
        ) from exc
    return jsonschema_rs


class ArgumentValidator:
    """A compiled JSON-schema validator for one tool's arguments."""

    __slots__ = ("_schema", "_validator", "backtracks")

    def __init__(self, tool_name: str, parameters: Mapping[str, Any]) -> None:
        module = _validator_module()
        schema = thaw(parameters)
        self._schema: Any = None
        self.backtracks = False  # True: a pattern needs the backtracking engine (see the module doc)
        try:
            self._validator = module.validator_for(schema, pattern_options=module.RegexOptions())
            return
        except (module.ValidationError, ValueError, TypeError):
            pass  # a backtracking pattern, or not a schema at all: the backtracking engine tells
        try:
            budget = module.FancyRegexOptions(backtrack_limit=BACKTRACK_LIMIT)
            self._validator = module.validator_for(schema, pattern_options=budget)
        except (module.ValidationError, ValueError, TypeError) as exc:
            raise SchemaError(f"Tool {tool_name!r} parameters: not a valid JSON schema: {exc}") from exc
        self._schema, self.backtracks = schema, True

    def off_loop(self, size: int) -> bool:
        """Whether arguments of `size` characters are checked off the loop (`check_off_loop`)."""
        return self.backtracks and size > _IN_PROCESS_BUDGET

    def problems(self, arguments: Any, size: int = 0) -> list[str]:
        """Each failing path of `arguments` (the first `_MAX_ERRORS`), with what it holds and what is
        wrong; empty when valid. Arguments of more than `_LISTED_ERRORS_BUDGET` characters (`size`,
        the text's length) report their first failing path only."""
        validator = self._validator
        if validator.is_valid(arguments):
            return []
        if size > _LISTED_ERRORS_BUDGET:
            try:
                validator.validate(arguments)
            except Exception as exc:  # jsonschema_rs.ValidationError
                first: Any = exc
                return [_problem(first.instance_path, first.message, received_text(first.instance)), _FIRST_ONLY]
            return []  # pragma: no cover - is_valid and validate agree
        problems: list[str] = []
        for error in validator.iter_errors(arguments):
            if len(problems) == _MAX_ERRORS:
                problems.append("(more errors left out)")
                break
            problems.append(_problem(error.instance_path, error.message, received_text(error.instance)))
        return problems

    async def check_off_loop(self, raw: str, arguments: Any, cancel: CancelToken) -> tuple[str, list[str]]:
        """`problems` of the argument text `raw` (parsed: `arguments`), found in a child process:
        ``("checked", problems)``, or ``("timed out", [])`` past `VALIDATION_SECONDS`, or
        ``("cancelled", [])`` when `cancel` fired first; the child is killed then (and when the
        caller is cancelled). Where no child process can run, the check runs here after all."""
        try:
            return await self._check_in_child(raw, cancel)
        except (OSError, _ChildFailed) as exc:
            _log.warning("argument check: no child process (%s); checking on the event loop", exc)
            return "checked", self.problems(arguments, len(raw))

    async def _check_in_child(self, raw: str, cancel: CancelToken) -> tuple[str, list[str]]:
        job = json.dumps({
            "schema": self._schema, "arguments": raw, "backtrack_limit": BACKTRACK_LIMIT,
            "max_errors": _MAX_ERRORS, "list": len(raw) <= _LISTED_ERRORS_BUDGET, "value_chars": _MAX_VALUE_CHARS,
        })
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _CHILD_CHECK, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        stopped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        unregister = cancel.on_cancel(lambda: _stop(stopped))
        talk = asyncio.ensure_future(child.communicate(job.encode("utf-8")))
        try:
            await asyncio.wait((talk, stopped), timeout=VALIDATION_SECONDS, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the call's task was cancelled: the check goes with it
            await _end(child, talk)
            raise
        finally:
            unregister()
        if not talk.done():
            await _end(child, talk)
            return ("cancelled" if stopped.done() else "timed out"), []
        output, _ = talk.result()
        try:
            found = json.loads(output)
        except ValueError:
            found = None
        if child.returncode != 0 or not isinstance(found, dict):
            raise _ChildFailed(f"the child process failed (exit status {child.returncode})")
        return "checked", [_problem(path, message, received) for path, message, received in found["errors"]] + found["notes"]


class _ChildFailed(Exception):
    """The argument check's child process ended without an answer."""


def _stop(stopped: asyncio.Future[None]) -> None:
    if not stopped.done():
        stopped.set_result(None)


async def _end(child: asyncio.subprocess.Process, talk: asyncio.Future[Any]) -> None:
    talk.cancel()
    if child.returncode is None:
        child.kill()
    await asyncio.shield(child.wait())


_FIRST_ONLY = f"(only the first error is listed for arguments over {_LISTED_ERRORS_BUDGET} characters)"

# What `check_off_loop`'s child runs: jsonschema-rs alone (no dshkit import), the same rules as `problems`.
_CHILD_CHECK = f"""
import json, sys
import jsonschema_rs
job = json.loads(sys.stdin.buffer.read())
options = jsonschema_rs.FancyRegexOptions(backtrack_limit=job["backtrack_limit"])
validator = jsonschema_rs.validator_for(job["schema"], pattern_options=options)
arguments = json.loads(job["arguments"])
def row(error):
    text = json.dumps(error.instance, ensure_ascii=False, separators=(",", ":"))
    limit = job["value_chars"]
    return [list(error.instance_path), error.message, text if len(text) <= limit else text[: limit - 3] + "..."]
errors, notes = [], []
if not validator.is_valid(arguments):
    if job["list"]:
        for error in validator.iter_errors(arguments):
            if len(errors) == job["max_errors"]:
                notes.append("(more errors left out)")
                break
            errors.append(row(error))
    else:
        try:
            validator.validate(arguments)
        except jsonschema_rs.ValidationError as error:
            errors.append(row(error))
        notes.append({_FIRST_ONLY!r})
sys.stdout.write(json.dumps({{"errors": errors, "notes": notes}}))
"""


def _problem(path: Any, message: str, received: str) -> str:
    return f"{_path(path)}: {message} (got {received})"


def invalid_arguments_text(tool_name: str, problems: list[str]) -> str:
    """The error result the model gets for arguments its tool's schema refuses."""
    lines = "\n".join(f"- {problem}" for problem in problems)
    return f"Invalid arguments for {tool_name}: the tool did not run. Fix these and call it again:\n{lines}"


def unchecked_arguments_text(tool_name: str) -> str:
    """The error result the model gets for arguments its tool's schema could not check in time."""
    return (
        f"Invalid arguments for {tool_name}: the tool did not run. Its schema's patterns could not check "
        f"these arguments within {VALIDATION_SECONDS:g} s; call it again with shorter arguments."
    )


def _path(parts: Any) -> str:
    """A JSON Pointer-like path: ``/items/0/name``; ``/`` for the arguments object itself."""
    return "/" + "/".join(str(part) for part in parts) if parts else "/"


def received_text(value: Any) -> str:
    """What the model wrote at a failing path, as short JSON text (the output check quotes it too)."""
    try:
        text = to_json(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."


__all__ = [
    "BACKTRACK_LIMIT",
    "VALIDATION_SECONDS",
    "MAX_ARGUMENT_DEPTH",
    "MAX_SENDABLE_DEPTH",
    "ArgumentValidator",
    "InvalidArgumentsText",
    "SchemaError",
    "invalid_arguments_text",
    "nests_deeper_than",
    "parse_arguments",
    "unchecked_arguments_text",
]
