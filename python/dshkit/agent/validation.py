"""Checking a tool call's arguments before its body runs: the JSON text, then the tool's schema.

`parse_arguments` turns the text the model wrote into the object a body gets, or says why it is
not one: not JSON (NaN and infinities are not JSON numbers, and a number too big for a float is
refused, not made infinite), not an object, or nested deeper than `MAX_ARGUMENT_DEPTH` (checked
before parsing, so no depth reaches Python's recursion limit).

The schema validator is `jsonschema-rs` (a dependency of dshkit): a compiled validator per tool,
about a microsecond per call for a typical schema (benches/bench_tools.py measures it beside the
pure-Python `jsonschema`). It holds the GIL while it runs, so a worker thread would not free the
event loop: its work is bounded instead. A schema's regular expressions (`pattern`,
`patternProperties`, e.g. an MCP server's) run with a backtracking budget per match, and the
failing paths are listed from an error iterator only for small arguments (that iterator builds
every error before it yields one); larger ones report their first failing path.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from dshkit.llm import thaw, to_json

MAX_ARGUMENT_DEPTH = 256  # what a frozen value holds: hooks and policies see the arguments frozen
MAX_SENDABLE_DEPTH = 512  # deeper, a call could not be rebuilt into a request (`StreamAssembler` refuses it)
BACKTRACK_LIMIT = 10_000  # steps one regex match of a schema may backtrack (fancy-regex's default: 1,000,000)
_MAX_ERRORS = 20  # a model that writes a wholly wrong object gets the first ones, not a flood
_LISTED_ERRORS_BUDGET = 64 * 1024  # argument characters up to which every failing path is listed
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
    if nests_deeper_than(raw, MAX_ARGUMENT_DEPTH):
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

    __slots__ = ("_validator",)

    def __init__(self, tool_name: str, parameters: Mapping[str, Any]) -> None:
        module = _validator_module()
        budget = module.FancyRegexOptions(backtrack_limit=BACKTRACK_LIMIT)
        try:
            self._validator = module.validator_for(thaw(parameters), pattern_options=budget)
        except (module.ValidationError, ValueError, TypeError) as exc:
            raise SchemaError(f"Tool {tool_name!r} parameters: not a valid JSON schema: {exc}") from exc

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
            except Exception as error:  # jsonschema_rs.ValidationError
                return [_problem(error), f"(further errors not listed: the arguments are over {_LISTED_ERRORS_BUDGET} characters)"]
            return []  # pragma: no cover - is_valid and validate agree
        problems: list[str] = []
        for error in validator.iter_errors(arguments):
            if len(problems) == _MAX_ERRORS:
                problems.append("(more errors left out)")
                break
            problems.append(_problem(error))
        return problems


def _problem(error: Any) -> str:
    return f"{_path(error.instance_path)}: {error.message} (got {_received(error.instance)})"


def invalid_arguments_text(tool_name: str, problems: list[str]) -> str:
    """The error result the model gets for arguments its tool's schema refuses."""
    lines = "\n".join(f"- {problem}" for problem in problems)
    return f"Invalid arguments for {tool_name}: the tool did not run. Fix these and call it again:\n{lines}"


def _path(parts: Any) -> str:
    """A JSON Pointer-like path: ``/items/0/name``; ``/`` for the arguments object itself."""
    return "/" + "/".join(str(part) for part in parts) if parts else "/"


def _received(value: Any) -> str:
    try:
        text = to_json(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."


__all__ = [
    "BACKTRACK_LIMIT",
    "MAX_ARGUMENT_DEPTH",
    "MAX_SENDABLE_DEPTH",
    "ArgumentValidator",
    "InvalidArgumentsText",
    "SchemaError",
    "invalid_arguments_text",
    "nests_deeper_than",
    "parse_arguments",
]
