"""pytest-benchmark setup shared by every `benches/bench_*.py` module.

- collects `bench_*.py` files (pytest only collects `test_*.py` by itself);
- puts `benches/` on `sys.path` so bench modules can `import workloads` under
  `--import-mode=importlib` (which leaves `sys.path` alone);
- gives every benchmark the suite's default timing options, which a test's own
  `@pytest.mark.benchmark(...)` keywords override;
- checks each module's `TARGETS` at collection and writes them, with the dshkit build, into the
  `--benchmark-json` file, where `benches/report.py` reads them.
"""

from __future__ import annotations

import struct
import sys
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest

BENCHES = Path(__file__).resolve().parent
if str(BENCHES) not in sys.path:
    sys.path.insert(0, str(BENCHES))

from report import check_target  # noqa: E402  (needs the sys.path entry above)

# Short rounds keep the whole suite within a few minutes on 2 cores; a 100 µs minimum round keeps
# the raw timings in the JSON file small for the nanosecond-scale benchmarks.
DEFAULT_BENCHMARK_OPTIONS: dict[str, Any] = {
    "max_time": 0.3,
    "min_time": 0.0001,
    "min_rounds": 5,
    "warmup": True,
    "warmup_iterations": 200,
}

_TARGETS_KEY = pytest.StashKey[list]()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if file_path.suffix != ".py" or not file_path.name.startswith("bench_"):
        return None
    # pytest collects a file itself when it is named on the command line or `python_files`
    # matches it: not twice.
    if parent.session.isinitpath(file_path) or any(
        fnmatch(file_path.name, pattern) for pattern in parent.config.getini("python_files")
    ):
        return None
    return pytest.Module.from_parent(parent, path=file_path)


# pytest-benchmark's own table, unless --benchmark-columns says otherwise: the columns that
# matter here, so it fits a terminal (report.py prints the ratios).
TERMINAL_COLUMNS = ["median", "mean", "iqr", "rounds", "iterations"]


def pytest_configure(config: pytest.Config) -> None:
    # Runs before pytest-benchmark's own (trylast) configure reads the option.
    if hasattr(config.option, "benchmark_columns") and not config.option.benchmark_columns:
        config.option.benchmark_columns = TERMINAL_COLUMNS
    # pytest-benchmark opens the JSON path as is; `make bench` points it into bench-results/.
    json_path = config.getoption("benchmark_json", None)
    if json_path is not None:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "benchmark" not in getattr(item, "fixturenames", ()):
            continue
        marker = item.get_closest_marker("benchmark")
        options = {**DEFAULT_BENCHMARK_OPTIONS, **(marker.kwargs if marker else {})}
        item.add_marker(pytest.mark.benchmark(**options), append=False)


def pytest_collection_finish(session: pytest.Session) -> None:
    targets: list[dict[str, Any]] = []
    seen_modules: set[str] = set()
    for item in session.items:
        module = getattr(item, "module", None)
        if module is None or module.__name__ in seen_modules:
            continue
        seen_modules.add(module.__name__)
        declared = getattr(module, "TARGETS", ())
        source = Path(module.__file__ or module.__name__).name
        for index, target in enumerate(declared):
            problem = check_target(target)
            if problem:
                raise pytest.UsageError(f"{source}: TARGETS[{index}]: {problem}")
            targets.append({**target, "declared_in": source})
    session.config.stash[_TARGETS_KEY] = targets


def pytest_benchmark_update_json(config: pytest.Config, benchmarks: Any, output_json: dict[str, Any]) -> None:
    output_json["dshkit_targets"] = config.stash.get(_TARGETS_KEY, [])
    output_json["dshkit_build"] = _dshkit_build()


def _dshkit_build() -> dict[str, Any]:
    """The version and build profile of the native core that was measured."""
    try:
        from dshkit import _core
    except ImportError as error:
        return {"version": None, "profile": "unknown", "error": str(error)}
    core_path = getattr(_core, "__file__", None)
    return {
        "version": getattr(_core, "__version__", None),
        "path": core_path,
        "profile": _build_profile(Path(core_path)) if core_path else "unknown",
    }


def _build_profile(library: Path) -> str:
    """'debug' if the extension carries DWARF debug info (cargo's dev profile), else 'release'.

    Cargo's release profile strips debug info by default; the dev profile keeps it. Reads only the
    ELF section names; anything else (another platform, a surprise) answers 'unknown'.
    """
    try:
        data = library.read_bytes()
        if data[:4] != b"\x7fELF" or data[4] != 2:  # 64-bit ELF only
            return "unknown"
        order = "<" if data[5] == 1 else ">"
        section_offset = struct.unpack_from(order + "Q", data, 0x28)[0]
        entry_size, entry_count, names_index = struct.unpack_from(order + "HHH", data, 0x3A)
        names_header = section_offset + names_index * entry_size
        names_offset = struct.unpack_from(order + "Q", data, names_header + 0x18)[0]
        for index in range(entry_count):
            name_at = struct.unpack_from(order + "I", data, section_offset + index * entry_size)[0]
            start = names_offset + name_at
            name = data[start : data.index(b"\0", start)]
            if name == b".debug_info":
                return "debug"
        return "release"
    except (OSError, struct.error, ValueError, IndexError):
        return "unknown"
