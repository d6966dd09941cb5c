"""JSON: `to_json`/`from_json` against the stdlib, orjson and msgspec on the same data.

`json` and `orjson` reject `FrozenDict` by themselves: the `*_default` rows pass
`default=json_default`, the `*_thaw` rows thaw first, and the `*_floor` rows serialise or parse
plain dicts with no freezing at all (what the fastest library costs when nothing is frozen).
`dshkit_bytes` is `to_json_bytes`, the form that returns bytes like orjson; the message loads
keep `from_json_then_freeze_message`, the two-pass load `Message.from_json` replaced (issue 15).
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable
from typing import Any

import msgspec
import orjson
import pytest

import workloads
from paired import paired_ratio
from support import KEY_ALPHABET, fnv1a_colliding_keys, key_cache_colliding_keys  # tests/support.py (pytest's `pythonpath`)
from dshkit import (
    Message,
    create_assistant_message,
    freeze,
    freeze_message,
    from_json,
    json_default,
    thaw,
    to_json,
    to_json_bytes,
)


DUMP_GROUPS = (("json-dumps-message", "a 3-block message"), ("json-dumps-200-rows", "200 frozen rows"))

TARGETS = [
    # Issue 15: dumping frozen values costs no more than orjson dumping the same plain dicts, in
    # both forms (`to_json` gives a str, `to_json_bytes` bytes as orjson does).
    *(
        {
            "name": f"{row} of {what} <= 1.0x orjson.dumps of the same plain dicts (issue 15)",
            "group": group,
            "row": row,
            "versus": "orjson_dumps_plain_floor",
            "max_ratio": 1.0,
        }
        for group, what in DUMP_GROUPS
        for row in ("dshkit", "dshkit_bytes")
    ),
    # The same ratios timed in paired rounds (`paired.py`): the rows above are timed seconds
    # apart, so on a shared machine their ratio also holds whatever changed in between.
    *(
        {
            "name": f"{row} of {what} <= 1.0x orjson.dumps of the same plain dicts, in paired rounds (issue 15)",
            "group": group,
            "row": row,
            "extra_info": "paired_ratio_vs_orjson",
            "max_value": 1.0,
        }
        for group, what in DUMP_GROUPS
        for row in ("dshkit", "dshkit_bytes")
    ),
    {
        "name": "Message.from_json (one pass, validated) <= 1.2x orjson.loads of the same text into dicts (issue 15)",
        "group": "json-loads-message",
        "versus": "orjson_loads_floor",
        "max_ratio": 1.2,
    },
    {
        "name": "from_json of 65,536 keys sharing one 32-bit FNV-1a hash within 3x of random keys (issue 9)",
        "group": "json-loads-65536-colliding-keys",
        "versus": "random_keys",
        "max_ratio": 3.0,
    },
    {
        "name": "from_json of 65,536 keys sharing one slot of the parser's key cache within 3x of random keys of their length",
        "group": "json-loads-65536-colliding-keys",
        "row": "key_cache_colliding",
        "versus": "random_keys_32",
        "max_ratio": 3.0,
    },
]


def assistant_message() -> Message:
    return create_assistant_message(workloads.assistant_blocks(), provider=workloads.PROVIDER, model=workloads.MODEL)


def compact_json_dumps(value: Any, **options: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, **options)


# --- serialising ------------------------------------------------------------------------------
# Each entry: name -> (function, which form of the data it takes: "frozen" or "plain").

DUMPERS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "dshkit": (to_json, "frozen"),
    "dshkit_bytes": (to_json_bytes, "frozen"),
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
    if name in ("dshkit", "dshkit_bytes"):
        benchmark.extra_info["paired_ratio_vs_orjson"] = round(paired_ratio(function, frozen, orjson.dumps, plain), 3)


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
    "from_json_then_freeze_message": lambda text: freeze_message(from_json(text)),
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


# --- hostile input ----------------------------------------------------------------------------


@functools.cache
def many_keys_objects() -> dict[str, str]:
    """Objects of 65,536 keys each: keys sharing a 32-bit FNV-1a hash (64 characters), keys
    sharing one slot of the parser's key cache (32 characters, the longest it caches), and random
    keys of each length."""
    fnv1a = fnv1a_colliding_keys(16)
    one_slot = key_cache_colliding_keys(65_536, 32)
    rng = random.Random(9)
    alphabet = KEY_ALPHABET.decode()
    random_keys = lambda like: ["".join(rng.choices(alphabet, k=len(like[0]))) for _ in like]  # noqa: E731
    as_object = lambda keys: "{" + ",".join(f'"{key}":{i}' for i, key in enumerate(keys)) + "}"  # noqa: E731
    return {
        "colliding": as_object(fnv1a),
        "random": as_object(random_keys(fnv1a)),
        "one_slot": as_object(one_slot),
        "random_32": as_object(random_keys(one_slot)),
    }


COLLIDING_KEYS_ROWS: dict[str, tuple[Callable[[str], Any], str]] = {
    "dshkit": (from_json, "colliding"),
    "random_keys": (from_json, "random"),
    "key_cache_colliding": (from_json, "one_slot"),
    "random_keys_32": (from_json, "random_32"),
    "json_loads_floor": (json.loads, "colliding"),
}


@pytest.mark.benchmark(group="json-loads-65536-colliding-keys", max_time=1.0, min_rounds=3, warmup=False)
@pytest.mark.parametrize("row", list(COLLIDING_KEYS_ROWS))
def test_json_loads_colliding_keys(benchmark, row: str) -> None:
    load, which = COLLIDING_KEYS_ROWS[row]
    text = many_keys_objects()[which]
    assert len(load(text)) == 65_536
    benchmark(load, text)
