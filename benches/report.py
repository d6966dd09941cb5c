"""Print the benchmark table: per group each row's median/mean and its ratio to the dshkit row, then
the performance targets (DESIGN section 5, issue 2) with PASS/MISS and the measured value.

Usage: python benches/report.py PATH.json [--strict]

PATH.json is pytest-benchmark's `--benchmark-json` output of `pytest benches`. The targets come
from the bench modules' `TARGETS` lists (benches/conftest.py copies them into the JSON) and from
`benchmark.extra_info["targets"]`; benches/README.md describes the format. This script only reads
and prints. Exit status: 0, or with `--strict` 1 when a target is missed or malformed; 2 when
PATH cannot be read.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

REFERENCE_ROW = "dshkit"
STATS = ("median", "mean", "min")
_RATIO_KEYS = ("max_ratio", "min_speedup")
_VALUE_KEYS = ("max_value", "min_value")
_KNOWN_KEYS = {
    "name", "group", "row", "stat", "versus", "versus_group", "max_seconds", "per",
    "extra_info", "declared_in", "applies_if_at_most", *_RATIO_KEYS, *_VALUE_KEYS,
}  # fmt: skip


# --- target declarations ----------------------------------------------------------------------


def check_target(target: object) -> str | None:
    """What is wrong with one target declaration, or None if it is well-formed."""
    if not isinstance(target, Mapping):
        return f"a target is a dict, not {type(target).__name__}"
    unknown = sorted(set(target) - _KNOWN_KEYS)
    if unknown:
        return f"unknown key(s) {unknown}; known: {sorted(_KNOWN_KEYS)}"
    for key in ("name", "group"):
        if not isinstance(target.get(key), str) or not target[key]:
            return f"{key!r} must be a non-empty str"
    for key in ("row", "versus", "versus_group", "extra_info", "declared_in"):
        if key in target and (not isinstance(target[key], str) or not target[key]):
            return f"{key!r} must be a non-empty str"
    if target.get("stat", "median") not in STATS:
        return f"'stat' must be one of {STATS}, not {target['stat']!r}"
    for key in (*_RATIO_KEYS, *_VALUE_KEYS, "max_seconds"):
        if key in target and not _is_number(target[key]):
            return f"{key!r} must be a finite number, not {target[key]!r}"
    conditions = target.get("applies_if_at_most", {})
    if not isinstance(conditions, Mapping) or not all(isinstance(k, str) and _is_number(v) for k, v in conditions.items()):
        return "'applies_if_at_most' must map extra_info keys to numbers"
    kinds = [key for key in ("versus", "max_seconds", "extra_info") if key in target]
    if len(kinds) != 1:
        return "give exactly one of 'versus' (a ratio), 'max_seconds' (a time) or 'extra_info' (a value)"
    kind = kinds[0]
    if kind == "versus" and not any(key in target for key in _RATIO_KEYS):
        return "'versus' needs 'max_ratio' and/or 'min_speedup'"
    if kind == "extra_info" and not any(key in target for key in _VALUE_KEYS):
        return "'extra_info' needs 'max_value' and/or 'min_value'"
    misplaced = {
        "versus": [*_VALUE_KEYS, "per"],
        "max_seconds": [*_RATIO_KEYS, *_VALUE_KEYS, "versus_group"],
        "extra_info": [*_RATIO_KEYS, "per", "versus_group"],
    }[kind]
    for key in misplaced:
        if key in target:
            return f"{key!r} does not go with {kind!r}"
    if "per" in target:
        per = target["per"]
        if not (isinstance(per, str) and per) and not (_is_number(per) and per > 0):
            return f"'per' must be a positive number or an extra_info key, not {per!r}"
    return None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# --- rows and groups --------------------------------------------------------------------------


def row_label(bench: Mapping[str, Any]) -> str:
    """A benchmark's display name: its test name without the `test_` prefix."""
    name = str(bench.get("name", "?"))
    return name[len("test_") :] if name.startswith("test_") else name


def find_row(rows: Sequence[Mapping[str, Any]], selector: str) -> tuple[Mapping[str, Any] | None, str]:
    """The one row `selector` names, or None and why not.

    Exact names win (the test name, its label, or its parametrize id), then substrings of the
    test name: `uuid7` picks `[uuid7]` over `[uuid7_str]`, `dshkit` picks the row named for dshkit.
    """
    exact = [row for row in rows if selector in (row.get("name"), row_label(row), row.get("param"))]
    matches = exact or [row for row in rows if selector in str(row.get("name", ""))]
    if len(matches) == 1:
        return matches[0], ""
    if not matches:
        return None, f"no row matching {selector!r}"
    names = ", ".join(row_label(row) for row in matches)
    return None, f"{selector!r} matches several rows ({names})"


def group_rows(benchmarks: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Benchmarks by group, in first-seen order (the order pytest ran them)."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for bench in benchmarks:
        groups.setdefault(str(bench.get("group") or "(no group)"), []).append(bench)
    return groups


def stat(bench: Mapping[str, Any], name: str = "median") -> float:
    return float(bench["stats"][name])


def format_time(seconds: float) -> str:
    """About three significant digits in ns, µs, ms or s."""
    for unit, scale in (("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)):
        value = seconds / scale
        if abs(value) < 999.5 or unit == "s":
            decimals = 0 if abs(value) >= 99.5 else 1 if abs(value) >= 9.95 else 2
            return f"{value:.{decimals}f} {unit}"
    raise AssertionError("unreachable")


def format_ratio(ratio: float) -> str:
    return f"{ratio:.2f}x" if ratio < 100 else f"{ratio:.0f}x"


def _format_note(key: str, value: object) -> str:
    if key.endswith("_bytes") and _is_number(value):
        return f"{key}={int(value)} B"  # type: ignore[call-overload]
    if _is_number(value) and isinstance(value, float):
        return f"{key}={value:.4g}"
    return f"{key}={value}"


def _short_labels(rows: Sequence[Mapping[str, Any]]) -> tuple[str, dict[int, str]]:
    """The test function the rows share (if one) and each row's label without it."""
    functions = {str(row.get("name", "")).split("[")[0] for row in rows}
    if len(functions) == 1 and all(row.get("param") for row in rows):
        return functions.pop(), {id(row): str(row["param"]) for row in rows}
    return "", {id(row): row_label(row) for row in rows}


def print_group(name: str, rows: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    reference, _ = find_row(rows, REFERENCE_ROW)
    ordered = sorted(rows, key=stat)
    function, labels = _short_labels(ordered)
    width = max(len("row"), *(len(label) for label in labels.values()))
    print(f"\n== {name}" + (f"  ({function})" if function else ""), file=out)
    print(f"   {'row':<{width}}  {'median':>9}  {'mean':>9}  {'rounds':>7}  {'vs dshkit':>9}", file=out)
    for row in ordered:
        if reference is None or stat(reference) <= 0:
            ratio = "-"
        else:
            ratio = format_ratio(stat(row) / stat(reference))
        notes = "  ".join(
            _format_note(key, value) for key, value in (row.get("extra_info") or {}).items() if key != "targets"
        )
        marker = "*" if row is reference else " "
        print(
            f" {marker} {labels[id(row)]:<{width}}  {format_time(stat(row)):>9}  "
            f"{format_time(stat(row, 'mean')):>9}  {row['stats'].get('rounds', '?'):>7}  {ratio:>9}"
            + (f"  {notes}" if notes else ""),
            file=out,
        )


# --- targets ----------------------------------------------------------------------------------


def collect_targets(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Targets from the modules' TARGETS (via conftest) and from each benchmark's extra_info."""
    targets = [dict(target) for target in results.get("dshkit_targets") or ()]
    for bench in results.get("benchmarks") or ():
        for target in (bench.get("extra_info") or {}).get("targets") or ():
            if isinstance(target, Mapping):
                defaults = {"group": bench.get("group"), "row": bench.get("name"), "declared_in": bench.get("name")}
                target = {**defaults, **target}
            targets.append(target)
    return targets


def evaluate(target: Mapping[str, Any], groups: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[str, str, str]:
    """(status, measured, required) for one target; status is PASS, MISS, SKIP or ERROR.

    For SKIP and ERROR, `measured` says why.
    """
    problem = check_target(target)
    if problem:
        return "ERROR", problem, ""
    statistic = target.get("stat", "median")
    row, why = _select(groups, target["group"], target.get("row", REFERENCE_ROW))
    if row is None:
        return ("ERROR" if "several" in why else "SKIP"), why, ""
    # A target stated for some conditions of the machine (a disk whose fsync is fast enough, say)
    # does not apply where the row measured other conditions.
    for key, limit in target.get("applies_if_at_most", {}).items():
        found = (row.get("extra_info") or {}).get(key)
        if _is_number(found) and found > limit:
            return "SKIP", f"{key}={found:g} here; the target assumes <= {limit:g}", ""

    if "versus" in target:
        versus, why = _select(groups, target.get("versus_group", target["group"]), target["versus"])
        if versus is None:
            return ("ERROR" if "several" in why else "SKIP"), why, ""
        if stat(versus, statistic) <= 0:
            return "ERROR", f"{row_label(versus)} measured no time", ""
        ratio = stat(row, statistic) / stat(versus, statistic)
        checks, required = [], []
        if "max_ratio" in target:
            checks.append(ratio <= target["max_ratio"])
            required.append(f"<= {target['max_ratio']:.2f}x")
        if "min_speedup" in target:
            checks.append(ratio > 0 and 1 / ratio >= target["min_speedup"])
            required.append(f">= {target['min_speedup']:g}x faster")
        measured = format_ratio(ratio) + ("" if statistic == "median" else f" of {statistic}s")
        if "min_speedup" in target and ratio > 0:
            measured += f" ({1 / ratio:.2f}x faster)" if ratio < 1 else " (slower)"
        return ("PASS" if all(checks) else "MISS"), measured, ", ".join(required)

    if "max_seconds" in target:
        per = target.get("per", 1)
        # "per": "steps" reads as "per step"
        unit = "" if per == 1 else f" per {per.removesuffix('s')}" if isinstance(per, str) else " per unit"
        if isinstance(per, str):
            per = (row.get("extra_info") or {}).get(per)
        if not _is_number(per) or per <= 0:
            return "ERROR", f"extra_info[{target['per']!r}] is {per!r}, not a positive number", ""
        seconds = stat(row, statistic) / float(per)
        return (
            ("PASS" if seconds <= target["max_seconds"] else "MISS"),
            f"{format_time(seconds)}{unit}" + ("" if statistic == "median" else f" ({statistic})"),
            f"<= {format_time(target['max_seconds'])}",
        )

    key = target["extra_info"]
    value = (row.get("extra_info") or {}).get(key)
    if not _is_number(value):
        return "SKIP", f"{row_label(row)} recorded no extra_info[{key!r}]", ""
    checks, required = [], []
    if "max_value" in target:
        checks.append(value <= target["max_value"])
        required.append(f"<= {target['max_value']:g}")
    if "min_value" in target:
        checks.append(value >= target["min_value"])
        required.append(f">= {target['min_value']:g}")
    return ("PASS" if all(checks) else "MISS"), f"{key}={value:g}", ", ".join(required)


def _select(
    groups: Mapping[str, Sequence[Mapping[str, Any]]], group: str, selector: str
) -> tuple[Mapping[str, Any] | None, str]:
    if group not in groups:
        return None, f"no group {group!r} in the results"
    row, why = find_row(groups[group], selector)
    return row, (f"group {group!r}: {why}" if row is None else "")


def print_targets(targets: Sequence[Mapping[str, Any]], groups: Mapping[str, Any], out: TextIO) -> int:
    """Print the targets section; return how many were missed or malformed."""
    print("\n== targets (DESIGN section 5, issue 2, and those the bench modules declare)", file=out)
    if not targets:
        print("   no targets recorded (was the JSON written by `pytest benches`?)", file=out)
        return 0
    failures = 0
    evaluated = [(target, *evaluate(target, groups)) for target in targets]
    measured_width = max([1, *(len(measured) for _, status, measured, _ in evaluated if status in ("PASS", "MISS"))])
    for target, status, measured, required in evaluated:
        failures += status in ("MISS", "ERROR")
        name = target.get("name", "?") if isinstance(target, Mapping) else repr(target)
        where = target.get("declared_in", "?") if isinstance(target, Mapping) else "?"
        if status in ("PASS", "MISS"):
            needs = f"needs {required}"
            print(f"   {status:<5}  {measured:<{measured_width}}  {needs:<22}  {name}  [{where}]", file=out)
        else:
            print(f"   {status:<5}  {'-':<{measured_width}}  {'':<22}  {name}  [{where}]: {measured}", file=out)
    return failures


# --- entry point ------------------------------------------------------------------------------


def print_report(results: Mapping[str, Any], out: TextIO) -> int:
    """Print the whole report; return how many targets were missed or malformed."""
    machine = results.get("machine_info") or {}
    build = results.get("dshkit_build") or {}
    cpu = (machine.get("cpu") or {}).get("brand_raw", machine.get("processor", "?"))
    print(
        f"dshkit benchmarks  {str(results.get('datetime', '?'))[:19]}  Python {machine.get('python_version', '?')}"
        f"  {cpu}  dshkit {build.get('version', '?')} ({build.get('profile', 'unknown')} build)",
        file=out,
    )
    if build.get("profile") == "debug":
        print("NOTE: the native core is a debug build: its numbers are indicative only.", file=out)
    print("Times per call; 'vs dshkit' is the row's median over the dshkit row's (marked *).", file=out)
    groups = group_rows(results.get("benchmarks") or ())
    if not groups:
        print("\n(no benchmarks in the results)", file=out)
    for name, rows in groups.items():
        print_group(name, rows, out)
    return print_targets(collect_targets(results), groups, out)


def main(argv: Sequence[str]) -> int:
    arguments = [argument for argument in argv if argument != "--strict"]
    if len(arguments) != 1 or arguments[0].startswith("-"):
        print(next(line for line in __doc__.splitlines() if line.startswith("Usage:")), file=sys.stderr)
        return 2
    path = arguments[0]
    try:
        with open(path, encoding="utf-8") as file:
            results = json.load(file)
    except OSError as error:
        print(f"report.py: cannot read {path}: {error.strerror}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as error:
        print(f"report.py: {path} is not JSON: {error}", file=sys.stderr)
        return 2
    if not isinstance(results, dict):
        print(f"report.py: {path} is not a pytest-benchmark JSON report", file=sys.stderr)
        return 2
    failures = print_report(results, sys.stdout)
    return 1 if failures and "--strict" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
