"""The package layout rules of docs/architecture.md, checked on the source.

Layers import only downwards (`llm` <- `session` <- `models` <- `agent` <- `cli`); the plug-ins at
the edge (`dshkit.interop`) may use every layer but `cli`, and no layer imports them; no import
circle among modules (imports at module level, outside `if TYPE_CHECKING:`); no module over 450
lines and no function over 60 (issue 33).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "dshkit"

LAYERS = {"llm": 0, "session": 1, "models": 2, "agent": 3, "interop": 4, "viewer": 4, "mcp": 4, "serve": 4, "cli": 5}
# Issue 33's rule: no module within 10% of the 500-line cap (so at most 450 lines), and every
# function (a method, a nested def) at most 60 lines, counted from its `def` line to its last
# line, decorators aside. Why: docs/decisions/code-layout.md.
MAX_LINES = 450
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = ["dshkit", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    if module == "dshkit.__main__":
        return "cli"  # `python -m dshkit` is the command line
    if len(parts) >= 2 and parts[1] in LAYERS:
        return parts[1]
    return "llm"  # dshkit, dshkit.llm, dshkit._core


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(path: Path, *, top_level_only: bool) -> set[str]:
    """The dshkit modules `path` imports (all imports, or only those run at import time)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [child.module] + [f"{child.module}.{alias.name}" for alias in child.names]
            else:
                names = []
            if names and (top or not top_level_only):
                found.update(name for name in names if name in MODULES)
            visit(child, inner)

    visit(tree, True)
    return found


def test_no_module_is_over_450_lines() -> None:
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by what they hold): {long}"


def test_no_function_is_over_60_lines() -> None:
    long = sorted(
        f"{name}:{node.lineno} {node.name} ({length} lines)"
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    )
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_imports_are_absolute() -> None:
    relative = [
        f"{name}:{node.lineno}"
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert not relative, relative


@pytest.mark.parametrize("name", sorted(MODULES))
def test_layers_import_only_downwards(name: str) -> None:
    own = LAYERS[layer_of(name)]
    upward = sorted(
        target
        for target in imported_modules(MODULES[name], top_level_only=False)
        if LAYERS[layer_of(target)] > own and not (target == "dshkit" or layer_of(target) == layer_of(name))
    )
    assert not upward, f"{name} ({layer_of(name)}) imports a higher layer: {upward}"


def test_no_import_circle() -> None:
    graph = {name: imported_modules(path, top_level_only=True) - {name} for name, path in MODULES.items()}
    # A package imports its __init__ before any submodule: that edge is implied, not a circle.
    cycles: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            connect(node)
    assert not cycles, cycles


MODEL_APIS = ("chat", "anthropic", "responses")


def model_api_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) >= 3 and parts[1] == "models" and parts[2] in MODEL_APIS else None


@pytest.mark.parametrize("name", sorted(name for name in MODULES if layer_of(name) == "models"))
def test_a_model_api_uses_only_its_own_folder_and_the_shared_modules(name: str) -> None:
    # Shared pieces live in dshkit.models.{protocol,errors,projection_parts,stream_translation} and
    # dshkit.models.http; one API reaching into another's folder is how shared code used to hide.
    own = model_api_of(name)
    foreign = sorted(
        target
        for target in imported_modules(MODULES[name], top_level_only=False)
        if (api := model_api_of(target)) is not None and api != own and own is not None
    )
    assert not foreign, f"{name} imports another API's modules: {foreign}"


# The native core (`rust/`): a folder per concern, each using only the folders before it in this
# order (docs/architecture.md, "The native core"), and `lib.rs` only wiring them into `_core`.
RUST = PACKAGE.parents[1] / "rust"
RUST_FOLDERS = {
    "value": {"errors", "freeze", "frozendict", "frozendict/entries", "ids", "message", "recycle", "strs", "walk"},
    "json": {"scan", "text", "read/fields", "read/keys", "read/parse", "read/recent", "read/strings", "read/tape"}
    | {"write/leaves", "write/message", "write/tree"},
    "message": {"content", "creation", "methods", "model_source"},
    "log": {"checksum", "event_columns", "event_record", "message_record", "message_tape", "message_vouch", "plain_rules"}
    | {"record_scan", "record_scan_reference", "record_scan_tests", "record_scanner", "records", "surface_fold"}
    | {"plain_vouch", "sort_ahead", "stored_records"},
    "original": {"chunk_row", "columns", "data_rules", "lines", "message_text", "read_ahead", "record_top"},
}
RUST_ORDER = list(RUST_FOLDERS)
# Reading and writing JSON share `json/scan.rs` and `json/text.rs`, never each other.
JSON_SIDES = ("read", "write")


def rust_code(path: Path) -> str:
    """The Rust source of `path` without its comments (`//`, `///`, `//!` to the end of the line)."""
    return "\n".join(line.split("//", 1)[0] for line in path.read_text(encoding="utf-8").splitlines())


def rust_sources() -> list[Path]:
    return sorted(RUST.rglob("*.rs"))


def test_rust_folders_hold_the_concepts_declared() -> None:
    found = {path.relative_to(RUST).with_suffix("").as_posix() for path in rust_sources()}
    declared = {"lib"} | {
        f"{folder}/{name}" for folder, names in RUST_FOLDERS.items() for name in names | {"mod"}
    }
    declared |= {f"json/{side}/mod" for side in JSON_SIDES}
    assert found == declared, {"undeclared": sorted(found - declared), "missing": sorted(declared - found)}


def test_rust_lib_only_wires() -> None:
    # Nothing but module declarations and the `_core` module registering each folder.
    wiring = [
        r"mod \w+;",
        r"use pyo3::prelude::\*;",
        r"#\[pymodule\]",
        r"fn _core\(m: &Bound<'_, PyModule>\) -> PyResult<\(\)> \{",
        r'm\.add\("__version__", env!\("CARGO_PKG_VERSION"\)\)\?;',
        r"\w+::register\(m\)\??;?",
        r"Ok\(\(\)\)",
        r"\}",
    ]
    lines = [line.strip() for line in rust_code(RUST / "lib.rs").splitlines() if line.strip()]
    logic = [line for line in lines if not any(re.fullmatch(pattern, line) for pattern in wiring)]
    assert not logic, f"rust/lib.rs holds more than wiring: {logic}"
    assert {m.group(1) for line in lines if (m := re.fullmatch(r"mod (\w+);", line))} == set(RUST_FOLDERS)


def crate_paths(path: Path) -> set[tuple[str, str]]:
    """Every `crate::folder::module` path `path` names, in `use` lines or inline."""
    return set(re.findall(r"\bcrate::(\w+)(?:::(\w+))?", rust_code(path)))


@pytest.mark.parametrize("path", rust_sources(), ids=lambda path: path.relative_to(RUST).as_posix())
def test_rust_folders_use_only_the_folders_before_them(path: Path) -> None:
    parts = path.relative_to(RUST).parts
    if len(parts) == 1:
        return  # lib.rs: the wiring above
    folder = parts[0]
    code = rust_code(path)
    assert "super::super" not in code, f"{path.name} reaches above its folder by `super::super`"
    targets = {target for target, _ in crate_paths(path)}
    assert targets <= set(RUST_ORDER), f"rust/{'/'.join(parts)} names no folder: {sorted(targets - set(RUST_ORDER))}"
    later = sorted(f"crate::{target}" for target in targets if RUST_ORDER.index(target) > RUST_ORDER.index(folder))
    assert not later, f"rust/{'/'.join(parts)} ({folder}/) uses a folder after its own: {later}"
    if folder == "json" and len(parts) > 2 and parts[1] in JSON_SIDES:
        other = JSON_SIDES[1 - JSON_SIDES.index(parts[1])]
        crossing = sorted(f"crate::json::{other}" for used in crate_paths(path) if used == ("json", other))
        assert not crossing, f"rust/{'/'.join(parts)} uses the other side of JSON: {crossing}"


def exported_by(folder: str) -> set[str]:
    """The `_core` names the Rust files of `folder` register (functions and classes)."""
    names: set[str] = set()
    for path in sorted((RUST / folder).rglob("*.rs")):
        code = rust_code(path)
        names.update(re.findall(r"wrap_pyfunction!\((\w+)", code))
        names.update(re.findall(r"add_class::<(\w+)>", code))
    return names


def test_rust_log_serves_only_the_session_layer() -> None:
    # The layer picture of docs/architecture.md: rust/log/ (and rust/original/ beside it) is the
    # session log's accelerator.
    log_names = exported_by("log") | exported_by("original")
    assert {"split_records", "decode_records", "SurfaceState"} <= log_names
    pattern = re.compile(r"\b(" + "|".join(sorted(log_names)) + r")\b")
    outside = sorted(
        f"{name}: {sorted(set(pattern.findall(path.read_text(encoding='utf-8'))))}"
        for name, path in MODULES.items()
        if layer_of(name) == "llm" and pattern.search(path.read_text(encoding="utf-8"))
    )
    assert not outside, f"modules below dshkit.session use rust/log/'s exports: {outside}"


def test_rust_items_are_crate_private() -> None:
    # The Python module is the only interface: nothing is `pub` to other crates.
    public = [
        f"{path.relative_to(RUST).as_posix()}:{number}"
        for path in rust_sources()
        for number, line in enumerate(rust_code(path).splitlines(), 1)
        if re.match(r"\s*pub\s+(unsafe\s+)?(fn|struct|enum|const|static|mod|use|trait|type)\b", line)
    ]
    assert not public, f"items `pub` beyond the crate (make them `pub(crate)`): {public}"
