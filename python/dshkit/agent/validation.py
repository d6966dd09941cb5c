"""Checking a tool call's arguments against the tool's JSON schema before its body runs.

The validator is `jsonschema-rs` (a dependency of dshkit): a compiled validator per tool,
about a microsecond per call for a typical schema (benches/bench_tools.py measures it beside the
pure-Python `jsonschema`). Every failing path is reported, with what the model wrote there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dshkit.llm import thaw, to_json

_MAX_ERRORS = 20  # a model that writes a wholly wrong object gets the first ones, not a flood
_MAX_VALUE_CHARS = 120


class SchemaError(ValueError):
    """A tool's `parameters` is not a valid JSON schema."""


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
        try:
            self._validator = module.validator_for(thaw(parameters))
        except (module.ValidationError, ValueError, TypeError) as exc:
            raise SchemaError(f"Tool {tool_name!r} parameters: not a valid JSON schema: {exc}") from exc

    def problems(self, arguments: Any) -> list[str]:
        """Each failing path of `arguments`, with what it holds and what is wrong; empty when valid."""
        if self._validator.is_valid(arguments):
            return []
        problems: list[str] = []
        for error in self._validator.iter_errors(arguments):
            if len(problems) == _MAX_ERRORS:
                problems.append("(more errors left out)")
                break
            problems.append(f"{_path(error.instance_path)}: {error.message} (got {received_text(error.instance)})")
        return problems


def invalid_arguments_text(tool_name: str, problems: list[str]) -> str:
    """The error result the model gets for arguments its tool's schema refuses."""
    lines = "\n".join(f"- {problem}" for problem in problems)
    return f"Invalid arguments for {tool_name}: the tool did not run. Fix these and call it again:\n{lines}"


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


__all__ = ["ArgumentValidator", "SchemaError", "invalid_arguments_text", "received_text"]
