"""JSON: `to_json`/`from_json` against the stdlib, orjson and msgspec on the same data.

`json` and `orjson` reject `FrozenDict` by themselves: the `*_default` rows pass
`default=json_default`, the `*_thaw` rows thaw first, and the `*_floor` rows serialise or parse
plain dicts with no freezing at all (what the fastest library costs when nothing is frozen).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import orjson
import pytest

import workloads
from dshkit import Message, create_assistant_message, freeze, freeze_message, from_json, json_default, thaw, to_json


def assistant_message() -> Message:
    return create_assistant_message(workloads.assistant_blocks(), provider=workloads.PROVIDER, model=workloads.MODEL)


def compact_json_dumps(value: Any, **options: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, **options)


# --- serialising ------------------------------------------------------------------------------
# Each entry: name -> (function, which form of the data it takes: "frozen" or "plain").

DUMPERS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "dshkit": (to_json, "frozen"),
    "json_dumps_default": (lambda value: compact_json_dumps(value, default=json_default), "frozen"),
    "orjson_dumps_default": (lambda value: orjson.dumps(value, default=json_default), "frozen"),
    "orjson_dumps_thaw": (lambda value: orjson.dumps(thaw(value)), "frozen"),
    "json_dumps_plain_floor": (compact_json_dumps, "plain"),
    "orjson_dumps_plain_floor": (orjson.dumps, "plain"),
}


def run_dump(benchmark: Any, name: str, frozen: Any, plain: Any) -> None:
    function, form = DUMPERS[name]
    value = frozen if form == "frozen" else plain
    assert json.loads(function(value)) == json.loads(to_json(frozen))
    benchmark(function, value)


@pytest.mark.benchmark(group="json-dumps-message")
@pytest.mark.parametrize("name", list(DUMPERS))
def test_json_dumps_message(benchmark, name: str) -> None:
    message = assistant_message()
    run_dump(benchmark, name, message, message.to_dict())


@pytest.mark.benchmark(group="json-dumps-200-rows")
@pytest.mark.parametrize("name", [*DUMPERS, "msgspec_encode_frozen_structs"])
def test_json_dumps_200_rows(benchmark, name: str) -> None:
    rows = workloads.rows_200()
    if name == "msgspec_encode_frozen_structs":
        structs = msgspec.convert(rows, workloads.RowTable)
        assert json.loads(msgspec.json.encode(structs)) == rows
        benchmark(msgspec.json.encode, structs)
        return
    run_dump(benchmark, name, freeze(rows), rows)


# --- parsing ----------------------------------------------------------------------------------

MESSAGE_LOADERS: dict[str, Callable[[str], Any]] = {
    "dshkit": Message.from_json,
    "json_loads_floor": json.loads,
    "orjson_loads_floor": orjson.loads,
    "orjson_loads_then_freeze_message": lambda text: freeze_message(orjson.loads(text)),
    "msgspec_decode_frozen_struct": lambda text: msgspec.json.decode(text, type=workloads.StructMessage),
}


@pytest.mark.benchmark(group="json-loads-message")
@pytest.mark.parametrize("load", list(MESSAGE_LOADERS.values()), ids=list(MESSAGE_LOADERS))
def test_json_loads_message(benchmark, load: Callable[[str], Any]) -> None:
    message = assistant_message()
    text = message.to_json()
    assert workloads.to_plain(load(text))["id"] == message.id
    benchmark(load, text)


ROW_LOADERS: dict[str, Callable[[str], Any]] = {
    "dshkit": from_json,
    "json_loads_floor": json.loads,
    "orjson_loads_floor": orjson.loads,
    "msgspec_decode_floor": msgspec.json.decode,
    "orjson_loads_then_freeze": lambda text: freeze(orjson.loads(text)),
    "msgspec_decode_frozen_structs": lambda text: msgspec.json.decode(text, type=workloads.RowTable),
}


@pytest.mark.benchmark(group="json-loads-200-rows")
@pytest.mark.parametrize("load", list(ROW_LOADERS.values()), ids=list(ROW_LOADERS))
def test_json_loads_200_rows(benchmark, load: Callable[[str], Any]) -> None:
    rows = workloads.rows_200()
    text = json.dumps(rows)
    assert workloads.to_plain(load(text)) == rows
    benchmark(load, text)
