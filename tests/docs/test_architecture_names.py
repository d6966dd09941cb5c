"""docs/architecture.md names only what the code has: every file of its rule tables exists, every
function or `Class.method` a row names is defined in one of that row's files, and every
`Class.method` the page names anywhere (the walk-through included) is an attribute of that class.

Python files are read with `ast` (a module-level def, class or assignment; a method of a class),
Rust files by their `fn`/`struct`/`const`/`static` items and `#[pyo3(name = "...")]` names.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "python" / "dshkit"

_TICKED = re.compile(r"`([^`]+)`")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*((\.|::)[A-Za-z_][A-Za-z0-9_]*)*$")
_BRACES = re.compile(r"\{([^}]*)\}")


def _expand(path: str) -> list[str]:
    """`models/{chat,anthropic}/x.py` -> one path per alternative."""
    match = _BRACES.search(path)
    if match is None:
        return [path]
    return [p for choice in match.group(1).split(",") for p in _expand(path[: match.start()] + choice + path[match.end() :])]


def _file(path: str) -> Path:
    return ROOT / path if path.startswith(("rust/", "tests/", "benches/", "docs/")) else PACKAGE / path


@cache
def _python_names(path: Path) -> frozenset[str]:
    """`name` for each module-level def/class/assignment, `Class.name` for each class member."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for member in ast.walk(node):
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(f"{node.name}.{member.name}")
                elif isinstance(member, (ast.Assign, ast.AnnAssign)):
                    for target in member.targets if isinstance(member, ast.Assign) else [member.target]:
                        if isinstance(target, ast.Name):
                            names.add(f"{node.name}.{target.id}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    names.add(target.id)
    return frozenset(names)


@cache
def _rust_names(path: Path) -> frozenset[str]:
    text = path.read_text(encoding="utf-8")
    items = re.findall(r"\b(?:fn|struct|enum|const|static|mod|type)\s+([A-Za-z_][A-Za-z0-9_]*)", text)
    renamed = re.findall(r'name\s*=\s*"([A-Za-z_][A-Za-z0-9_]*)"', text)
    return frozenset(items + renamed)


def _defines(path: Path, name: str) -> bool:
    if path.suffix == ".py":
        return name in _python_names(path)
    if path.suffix == ".js":  # the viewer page's script: `function name(`
        return re.search(rf"\bfunction {re.escape(name)}\(", path.read_text(encoding="utf-8")) is not None
    last = re.split(r"\.|::", name)[-1]  # `record_scan::sort`, `Message.with_content`, `_core.encode_ulid`
    return last in _rust_names(path)


def _rows() -> list[tuple[int, list[str], str]]:
    """(line number, files, function cell) of every rule-table row."""
    rows = []
    for number, line in enumerate(DOC.read_text(encoding="utf-8").splitlines(), 1):
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if not line.startswith("|") or len(cells) != 3 or cells[0] in ("rule", "---"):
            continue
        files = [path for ticked in _TICKED.findall(cells[1]) for path in _expand(ticked)]
        rows.append((number, files, cells[2]))
    return rows


ROWS = _rows()


def test_the_tables_have_rows() -> None:
    assert len(ROWS) > 30
    assert all(files for _, files, _ in ROWS), [number for number, files, _ in ROWS if not files]


@pytest.mark.parametrize(("line", "files", "functions"), ROWS, ids=[f"line{row[0]}" for row in ROWS])
def test_each_row_names_what_its_files_define(line: int, files: list[str], functions: str) -> None:
    missing_files = [path for path in files if not _file(path).is_file()]
    assert not missing_files, f"docs/architecture.md:{line}: no such file {missing_files}"
    for ticked in _TICKED.findall(functions):
        for token in (part.strip() for part in ticked.split("/") if part.strip()):
            if token.endswith((".py", ".rs")) or "/" in ticked and ticked.endswith((".py", ".rs")):
                assert _file(ticked).is_file(), f"docs/architecture.md:{line}: no such file {ticked}"
                break
            if not _NAME.match(token):
                continue  # a phrase or an expression, not a name
            assert any(_defines(_file(path), token) for path in files), (
                f"docs/architecture.md:{line}: {token!r} is defined in none of {files}"
            )


@cache
def _classes() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(path)
    return found


def test_every_class_method_the_page_names_exists() -> None:
    """`Session._append`-style names anywhere on the page, the walk-through included."""
    text = re.sub(r"```.*?```", "", DOC.read_text(encoding="utf-8"), flags=re.S)  # code blocks: not names
    assert "Session.append" in _TICKED.findall(text)  # the ticks pair up
    wrong = []
    for ticked in set(_TICKED.findall(text)):
        for token in ticked.split("/"):
            parts = token.strip().split(".")
            if len(parts) != 2 or not all(part.isidentifier() for part in parts) or parts[0] not in _classes():
                continue
            if not any(token.strip() in _python_names(path) for path in _classes()[parts[0]]):
                wrong.append(token.strip())
    assert not wrong, f"docs/architecture.md names methods that do not exist: {sorted(wrong)}"
