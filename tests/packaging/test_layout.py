"""The package layout rules of docs/architecture.md, checked on the source.

Layers import only downwards (`llm` <- `session` <- `models` <- `agent` <- `cli`); the plug-ins at
the edge (`dshkit.interop`) may use every layer but `cli`, and no layer imports them; no import
circle among modules (imports at module level, outside `if TYPE_CHECKING:`); no module over 500
lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "dshkit"

LAYERS = {"llm": 0, "session": 1, "models": 2, "agent": 3, "interop": 4, "mcp": 4, "cli": 5}
MAX_LINES = 500


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


def test_no_module_is_over_500_lines() -> None:
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, long


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
    # Shared pieces live in dshkit.models.{protocol,errors,projection,stream_translation} and
    # dshkit.models.http; one API reaching into another's folder is how shared code used to hide.
    own = model_api_of(name)
    foreign = sorted(
        target
        for target in imported_modules(MODULES[name], top_level_only=False)
        if (api := model_api_of(target)) is not None and api != own and own is not None
    )
    assert not foreign, f"{name} imports another API's modules: {foreign}"
