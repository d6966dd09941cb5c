"""Tool-argument validation: dshkit's check (jsonschema-rs, compiled once per tool) against the
validators a user would otherwise reach for, on a typical 5-field schema.

Two groups: valid arguments (the usual case: one `is_valid`) and invalid arguments (every
failing path reported, as the model's error result needs). Rows: `dshkit`
(`ArgumentValidator.problems`), `jsonschema` (the pure-Python reference, its validator built
once and cached), `fastjsonschema` (generated Python code; it reports the first error only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from dshkit.agent._tools.validation import ArgumentValidator
from dshkit.llm import freeze

GROUP = "tool-arguments-5-fields"
INVALID_GROUP = "tool-arguments-5-fields-invalid"

TARGETS = [
    {
        "name": "tool argument validation <= 20 µs for a 5-field schema",
        "group": GROUP,
        "row": "dshkit",
        "stat": "min",
        "max_seconds": 20e-6,
    },
    {
        "name": "tool argument validation >= 10x faster than a cached jsonschema validator",
        "group": GROUP,
        "versus": "jsonschema",
        "stat": "min",
        "min_speedup": 10.0,
    },
    {
        "name": "invalid arguments (every failing path) <= 20 µs for a 5-field schema",
        "group": INVALID_GROUP,
        "row": "dshkit",
        "stat": "min",
        "max_seconds": 20e-6,
    },
]

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "line": {"type": "integer", "minimum": 0},
        "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
        "mode": {"enum": ["read", "write", "append"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["path", "mode"],
    "additionalProperties": False,
}
VALID = {"path": "src/main.py", "line": 10, "limit": 100, "mode": "read", "tags": ["a", "b"]}
INVALID = {"path": "", "line": -1, "mode": "delete", "tags": ["a", 3], "extra": True}


def _dshkit() -> Callable[[Any], Any]:
    return ArgumentValidator("files", freeze(SCHEMA)).problems


def _jsonschema() -> Callable[[Any], Any]:
    validator = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)
    return lambda arguments: [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(arguments)]


def _fastjsonschema() -> Callable[[Any], Any]:
    fastjsonschema = pytest.importorskip("fastjsonschema")
    check = fastjsonschema.compile(SCHEMA)

    def validate(arguments: Any) -> list[str]:
        try:
            check(arguments)
        except fastjsonschema.JsonSchemaValueException as exc:
            return [exc.message]
        return []

    return validate


VALIDATORS = {"dshkit": _dshkit, "jsonschema": _jsonschema, "fastjsonschema": _fastjsonschema}


@pytest.mark.benchmark(group=GROUP)
@pytest.mark.parametrize("build", list(VALIDATORS.values()), ids=list(VALIDATORS))
def test_valid_arguments(benchmark: Any, build: Callable[[], Callable[[Any], Any]]) -> None:
    validate = build()
    assert validate(VALID) == [] and validate(INVALID) != []
    benchmark(validate, VALID)


@pytest.mark.benchmark(group=INVALID_GROUP)
@pytest.mark.parametrize("build", list(VALIDATORS.values()), ids=list(VALIDATORS))
def test_invalid_arguments(benchmark: Any, build: Callable[[], Callable[[Any], Any]]) -> None:
    validate = build()
    benchmark(validate, INVALID)
