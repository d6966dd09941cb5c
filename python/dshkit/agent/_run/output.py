"""Structured output: the JSON schema an `output_type` asks for, and the check of what the model wrote.

`OutputSpec` is built once per `output_type` (pydantic model, dataclass, TypedDict, scalar,
``list[...]``, a union of them; through pydantic's `TypeAdapter`, so pydantic is needed only when
structured output is asked for: ``pip install 'dshkit[typed]'``). A type whose schema is not an
object (a scalar, a list, a union) is wrapped as ``{"response": <value>}``: both the tool mode's
arguments and the APIs' native structured output (OpenAI's strict mode) need an object.

What the model sees goes into the request header's ``config["output_schema"]``
(`OutputSpec.header_entry`); `check_text` and `check_arguments` give the typed value or every
failing path, and `problems_text` is the validation error the model gets back for a retry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dshkit.agent._tools.validation import received_text

DEFAULT_OUTPUT_NAME = "final_result"
WRAPPED_KEY = "response"
_DEFAULT_DESCRIPTION = "The final answer. Give it by calling this tool (or, when asked for JSON, as the JSON document itself)."
_MAX_PROBLEMS = 20
_CACHE: dict[tuple[Any, str], OutputSpec] = {}


def _pydantic() -> Any:
    try:
        import pydantic
    except ImportError as exc:
        raise ImportError(
            "structured output (output_type=) builds the schema and validates with pydantic, which is not installed: "
            "pip install 'dshkit[typed]'"
        ) from exc
    return pydantic


class OutputSpec:
    """The output an `output_type` asks for: its name, JSON schema, and validation."""

    __slots__ = ("_adapter", "_pydantic", "description", "entry", "name", "output_type", "schema", "wrapped")

    def __init__(self, output_type: Any, *, name: str = DEFAULT_OUTPUT_NAME, description: str | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"output name: expected a non-empty str, got {name!r}")
        pydantic = _pydantic()
        try:
            adapter = pydantic.TypeAdapter(output_type)
            schema = adapter.json_schema()
        except Exception as exc:  # not a type pydantic can validate (an arbitrary class, ...)
            raise TypeError(f"output_type {output_type!r}: cannot build a JSON schema for it: {exc}") from exc
        self._pydantic = pydantic
        self._adapter = adapter
        self.output_type = output_type
        self.name = name
        self.wrapped = not (schema.get("type") == "object" and "properties" in schema)
        if self.wrapped:
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {WRAPPED_KEY: schema}, "required": [WRAPPED_KEY], "additionalProperties": False}
            if defs is not None:
                schema["$defs"] = defs  # references point at the root: keep the definitions there
        self.schema: dict[str, Any] = schema
        doc = description if description is not None else (schema.get("description") if not self.wrapped else None)
        self.description: str = doc or _DEFAULT_DESCRIPTION
        self.entry = {"name": name, "schema": schema, "description": self.description, "strict": False}

    def header_entry(self) -> dict[str, Any]:
        """The request header's ``config["output_schema"]`` value (`name`, `schema`, `description`, `strict`)."""
        return self.entry

    def tool_spec(self) -> dict[str, Any]:
        """The final-answer tool the tool mode adds to the request's tools."""
        return {"name": self.name, "description": self.description, "parameters": self.schema}

    def check_text(self, text: str) -> tuple[Any, list[str]]:
        """The typed value of a native-mode answer (JSON text), or the failing paths."""
        if not self.wrapped:
            try:
                return self._adapter.validate_json(text), []
            except self._pydantic.ValidationError as exc:
                return None, _problems(exc, ())
        try:
            document = json.loads(text)
        except ValueError as exc:
            return None, [f"/: not JSON ({exc})"]
        return self.check_arguments(document)

    def check_arguments(self, document: Any) -> tuple[Any, list[str]]:
        """The typed value of a parsed JSON document (the final tool's arguments), or the failing paths."""
        prefix: tuple[Any, ...] = ()
        if self.wrapped:
            if not isinstance(document, Mapping) or WRAPPED_KEY not in document:
                return None, [f"/{WRAPPED_KEY}: Field required (got {received_text(document)})"]
            extra = sorted(str(key) for key in document if key != WRAPPED_KEY)
            if extra:
                return None, [f"/{key}: Extra inputs are not permitted" for key in extra]
            document, prefix = document[WRAPPED_KEY], (WRAPPED_KEY,)
        try:
            return self._adapter.validate_python(document), []
        except self._pydantic.ValidationError as exc:
            return None, _problems(exc, prefix)

    def dump(self, value: Any) -> Any:
        """`value` (of the output type) as the JSON document the model would write for it."""
        document = self._adapter.dump_python(value, mode="json")
        return {WRAPPED_KEY: document} if self.wrapped else document


def output_spec(output_type: Any, name: str = DEFAULT_OUTPUT_NAME) -> OutputSpec:
    """The (cached) `OutputSpec` of `output_type`: a type's schema is built once per process."""
    try:
        key = (output_type, name)
        spec = _CACHE.get(key)
    except TypeError:  # an unhashable annotation: built each time
        return OutputSpec(output_type, name=name)
    if spec is None:
        spec = _CACHE[key] = OutputSpec(output_type, name=name)
    return spec


def problems_text(name: str, problems: list[str], *, tool_mode: bool) -> str:
    """The validation error the model gets back: each failing path, and how to answer again."""
    lines = "\n".join(f"- {problem}" for problem in problems)
    how = f"Call {name} again with the corrected arguments." if tool_mode else "Answer again with the corrected JSON document only."
    return f"Your final result did not validate; fix these (this replaces your previous answer):\n{lines}\n{how}"


def _problems(exc: Any, prefix: tuple[Any, ...]) -> list[str]:
    problems: list[str] = []
    for error in exc.errors(include_url=False):
        if len(problems) == _MAX_PROBLEMS:
            problems.append("(more errors left out)")
            break
        path = "/" + "/".join(str(part) for part in (*prefix, *error["loc"]))
        problems.append(f"{path}: {error['msg']} (got {received_text(error.get('input'))})")
    return problems


__all__ = ["DEFAULT_OUTPUT_NAME", "WRAPPED_KEY", "OutputSpec", "output_spec", "problems_text"]
