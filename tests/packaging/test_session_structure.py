"""The session package's structure rules (issue 29), checked on the source.

- Only `dshkit.session.stores` tells a location's store from its text: no other module tests a log
  suffix or a URL scheme (`open_store` / `choose_store` do, once; the original's JSONL store, which
  lives with its format in `dshkit.session.dsh`, tells a compressed file by its `.zstd`).
- No import circle among dshkit's modules even counting imports inside functions (`Session.fork`
  used to import `dshkit.session._fork`, which imported `Session` back).
- No module reaches into the private attributes of a class another module defines.
- No two modules of the package share a name that says different things (`records`, `events`).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from tests.packaging.test_layout import MODULES, imported_modules

STORES = "dshkit.session.stores"
ORIGINAL_JSONL_STORE = "dshkit.session.dsh.jsonl_store"
LOCATION_TEXT = {"://", ".jsonl", ".sqlite", ".db", ".zstd", ".jsonl.zstd", "postgresql", "postgres"}


def _constants_outside_fstrings(tree: ast.AST) -> list[ast.Constant]:
    in_fstring = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    return [node for node in ast.walk(tree) if isinstance(node, ast.Constant) and id(node) not in in_fstring]


def test_only_the_stores_package_reads_a_location() -> None:
    found = []
    for name, path in MODULES.items():
        if name in (STORES, ORIGINAL_JSONL_STORE) or name.startswith(STORES + "."):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _constants_outside_fstrings(tree):
            if isinstance(node.value, str) and node.value.lower() in LOCATION_TEXT:
                found.append(f"{name}:{node.lineno}: {node.value!r}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("suffix", "suffixes", "splitext"):
                found.append(f"{name}:{node.lineno}: .{node.attr}")
    assert not found, f"a location's suffix or scheme is tested outside dshkit.session.stores: {found}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return cycles


def test_no_import_circle_even_inside_functions() -> None:
    graph = {name: imported_modules(path, top_level_only=False) - {name} for name, path in MODULES.items()}
    assert not _cycles(graph)


def test_the_circle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _private_members(tree: ast.AST) -> set[str]:
    """The private names the classes of a module define (methods, class attributes, `self._x = ...`)."""
    names: set[str] = set()
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)  # __slots__ entries
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


# `History._view` is the constructor the surface shares with `History` (left for the surface's owner);
# `_replace` is a NamedTuple's public method.
ALLOWED = {"_view", "_replace"}


def test_no_module_reaches_into_another_modules_privates() -> None:
    reaches = []
    for name, path in MODULES.items():
        if not name.startswith("dshkit.session"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _private_members(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                and node.attr not in own
                and node.attr not in ALLOWED
            ):
                reaches.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not reaches, reaches


def test_fork_is_a_method_of_session_and_its_module_takes_public_values() -> None:
    fork = MODULES["dshkit.session._fork"]
    assert "dshkit.session.session" not in imported_modules(fork, top_level_only=False)
    session_tree = ast.parse(MODULES["dshkit.session.session"].read_text(encoding="utf-8"))
    session_class = next(node for node in session_tree.body if isinstance(node, ast.ClassDef) and node.name == "Session")
    assert "fork" in {node.name for node in session_class.body if isinstance(node, ast.FunctionDef)}


def test_module_names_say_which_records_and_which_events() -> None:
    stems = Counter(Path(path).stem for path in MODULES.values() if Path(path).stem != "__init__")
    assert stems["records"] == 0, "checksummed records and the original's codec are named for what they are"
    event_modules = sorted(name for name in MODULES if name.rsplit(".", 1)[-1] == "events")
    assert event_modules == ["dshkit.session.events"], f"'events' names the log's events only, not {event_modules}"


def _every_import(path: Path) -> set[str]:
    """The dshkit modules `path` imports anywhere, `if TYPE_CHECKING:` blocks included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update([node.module, *(f"{node.module}.{alias.name}" for alias in node.names)])
    return found & set(MODULES)


def test_no_import_circle_even_for_type_checking() -> None:
    # `attachments` used to import `Session` for its annotations while `session` imported it (and
    # `fork`, which imported it too): a circle a type checker and a reader still walk.
    graph = {name: _every_import(path) - {name} for name, path in MODULES.items()}
    assert not _cycles(graph)


def test_session_members_are_its_own() -> None:
    # `Session` holds its parts; nothing binds a member onto it from another module
    # (`attach = _attach`, `attachments = property(session_attachments)` used to).
    session_tree = ast.parse(MODULES["dshkit.session.session"].read_text(encoding="utf-8"))
    session_class = next(node for node in session_tree.body if isinstance(node, ast.ClassDef) and node.name == "Session")
    imported = {
        alias.asname or alias.name
        for node in ast.walk(session_tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    bound = [
        ast.unparse(node)
        for node in session_class.body
        if isinstance(node, ast.Assign) and any(isinstance(name, ast.Name) and name.id in imported for name in ast.walk(node.value))
    ]
    assert not bound, f"Session members bound from other modules: {bound}"
