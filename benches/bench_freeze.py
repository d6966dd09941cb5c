"""Deep freeze: `dshkit.freeze` against the other ways to get an immutable or detached tree.

Each group freezes one workload with every alternative; `to_plain` checks each result once,
outside the timing, so a broken alternative cannot win.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import frozendict
import msgspec
import pyrsistent
import pytest

import workloads
from dshkit import freeze
from paired import paired_ratio

TARGETS = [
    # Paired rounds (`paired.py`): rows timed seconds apart on this shared machine moved the
    # pure-Python ratio from 12.7x to 8.0x between runs of the same build.
    {
        "name": "freeze 200-row tool result <= 0.5x orjson.loads(orjson.dumps(x)), in paired rounds",
        "group": "freeze-200-rows",
        "row": "dshkit",
        "extra_info": "paired_ratio_vs_orjson_roundtrip",
        "max_value": 0.5,
    },
    {
        "name": "freeze 200-row tool result >= 10x faster than a pure-Python recursive freeze (<= 0.1x), in paired rounds",
        "group": "freeze-200-rows",
        "row": "dshkit",
        "extra_info": "paired_ratio_vs_pure_python_freeze",
        "max_value": 0.1,
    },
    {
        "name": "re-freezing a frozen 200-row tree allocates nothing (DESIGN section 2)",
        "group": "refreeze-200-rows",
        "extra_info": "alloc_peak_bytes",
        "max_value": 0,
    },
]

# Calls per allocation measurement of a re-freeze: many for dshkit (a per-call leak would add up),
# few for the alternatives (they allocate on every call, and take milliseconds under tracemalloc).
REFREEZE_CALLS = {"dshkit": 1000}
REFREEZE_CALLS_DEFAULT = 3

Freezer = Callable[[Any], Any]

FREEZERS: dict[str, Freezer] = {
    "dshkit": freeze,
    "pure_python_freeze": workloads.pure_python_freeze,
    "deepcopy": copy.deepcopy,
    "orjson_roundtrip": workloads.orjson_roundtrip,
    "pyrsistent_freeze": pyrsistent.freeze,
    "frozendict_deepfreeze": frozendict.deepfreeze,
    "immutables_map": workloads.immutables_freeze,
    "msgspec_roundtrip": workloads.msgspec_roundtrip,
}

ROW_FREEZERS: dict[str, Freezer] = {
    **FREEZERS,
    # The typed route: validate and convert into frozen structs with tuple fields.
    "msgspec_frozen_structs": lambda rows: msgspec.convert(rows, workloads.RowTable),
}


def run_freeze(benchmark: Any, freezer: Freezer, value: Any) -> None:
    assert workloads.to_plain(freezer(value)) == workloads.to_plain(value)
    benchmark(freezer, value)


@pytest.mark.benchmark(group="freeze-200-rows")
@pytest.mark.parametrize("freezer", list(ROW_FREEZERS.values()), ids=list(ROW_FREEZERS))
def test_freeze_200_rows(benchmark, freezer: Freezer) -> None:
    rows = workloads.rows_200()
    run_freeze(benchmark, freezer, rows)
    if freezer is freeze:
        for versus in ("orjson_roundtrip", "pure_python_freeze"):
            benchmark.extra_info[f"paired_ratio_vs_{versus}"] = round(paired_ratio(freeze, rows, FREEZERS[versus], rows), 3)


@pytest.mark.benchmark(group="freeze-4kb-json-tool-result")
@pytest.mark.parametrize("freezer", list(FREEZERS.values()), ids=list(FREEZERS))
def test_freeze_4kb_json_tool_result(benchmark, freezer: Freezer) -> None:
    run_freeze(benchmark, freezer, workloads.search_results_4kb())


@pytest.mark.benchmark(group="freeze-assistant-3-blocks")
@pytest.mark.parametrize("freezer", list(FREEZERS.values()), ids=list(FREEZERS))
def test_freeze_assistant_3_blocks(benchmark, freezer: Freezer) -> None:
    run_freeze(benchmark, freezer, workloads.assistant_blocks())


REFREEZERS = {name: FREEZERS[name] for name in (
    "dshkit", "pure_python_freeze", "pyrsistent_freeze", "frozendict_deepfreeze", "immutables_map",
)}  # fmt: skip


@pytest.mark.benchmark(group="refreeze-200-rows")
@pytest.mark.parametrize("name", list(REFREEZERS))
def test_refreeze_200_rows(benchmark, name: str) -> None:
    """Freezing a tree the same library already froze (DESIGN: frozen parts are reused)."""
    freezer = REFREEZERS[name]
    frozen = freezer(workloads.rows_200())
    calls = REFREEZE_CALLS.get(name, REFREEZE_CALLS_DEFAULT)
    benchmark.extra_info["alloc_peak_bytes"] = workloads.peak_allocation_bytes(freezer, frozen, calls)
    benchmark.extra_info["alloc_calls"] = calls
    benchmark.extra_info["returns_same_object"] = freezer(frozen) is frozen
    run_freeze(benchmark, freezer, frozen)
