"""The public interface: what each public package exports, and the conventions it keeps.

`public_api.txt` beside this file is the snapshot of every exported name: its kind, the parameters
of a function, a class's constructor and its public members. A change to the public API fails
`test_public_api_matches_the_snapshot` until the snapshot is written again on purpose:

    DSHKIT_WRITE_API_SNAPSHOT=1 python -m pytest tests/packaging/test_public_api.py

Only what is stable across the supported interpreters is recorded (names and parameter names and
kinds, not annotations or reprs), so the snapshot holds on 3.10 to 3.13 alike.
"""

from __future__ import annotations

import difflib
import enum
import importlib
import inspect
import os
from pathlib import Path
from typing import Any

import pytest

SNAPSHOT = Path(__file__).with_name("public_api.txt")
PACKAGE = Path(__file__).resolve().parents[2] / "python" / "dshkit"

# The packages a user imports from; everything else is reached through them or is the engine.
PUBLIC_PACKAGES = (
    "dshkit",
    "dshkit.llm",
    "dshkit.session",
    "dshkit.session.stores",
    "dshkit.models",
    "dshkit.agent",
    "dshkit.mcp",
)

# Engine parts a user never needs by name (reached through `Agent` / `Session` when at all).
ENGINE_PARTS = {"dshkit.agent": {"Inbox", "StreamAssembler", "TokenMeter", "ToolCallRunner", "ToolGate"}}

# typing constructs (NewType, Literal, Union and Callable aliases) print differently per interpreter.
_ALIAS_MODULES = ("typing", "types", "collections.abc", "_collections_abc")


def _parameters(function: Any) -> str:
    """`(a, b=, /, *, c=, **kw)`: parameter names and kinds, defaults marked, nothing version-bound."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        text = getattr(function, "__text_signature__", None)
        return text.replace("$", "") if text else "(...)"
    parts: list[str] = []
    for index, parameter in enumerate(parameters):
        kind = parameter.kind
        if kind is parameter.KEYWORD_ONLY and (index == 0 or parameters[index - 1].kind < parameter.VAR_POSITIONAL):
            parts.append("*")
        if kind is parameter.VAR_POSITIONAL:
            parts.append(f"*{parameter.name}")
        elif kind is parameter.VAR_KEYWORD:
            parts.append(f"**{parameter.name}")
        else:
            parts.append(parameter.name + ("=" if parameter.default is not parameter.empty else ""))
        following = parameters[index + 1] if index + 1 < len(parameters) else None
        if kind is parameter.POSITIONAL_ONLY and (following is None or following.kind is not parameter.POSITIONAL_ONLY):
            parts.append("/")
    return f"({', '.join(parts)})"


def _member_line(name: str, value: Any) -> str | None:
    if isinstance(value, (staticmethod, classmethod)):
        return f"  method {name}{_parameters(value.__func__)}"
    if inspect.isfunction(value) or inspect.ismethoddescriptor(value) or inspect.isbuiltin(value):
        return f"  method {name}{_parameters(value)}"
    if isinstance(value, enum.Enum):
        return f"  member {name}"
    return None if inspect.isclass(value) else f"  attribute {name}"


def _own_members(cls: type) -> list[str]:
    """A class's public members defined by dshkit itself (not inherited from typing or builtins)."""
    members: dict[str, str] = {}
    for klass in cls.__mro__:
        if not (getattr(klass, "__module__", "") or "").startswith("dshkit"):
            continue
        for name, value in vars(klass).items():
            if not name.startswith("_") and name not in members and (line := _member_line(name, value)):
                members[name] = line
        for field in vars(klass).get("__annotations__", {}):
            if not field.startswith("_"):
                members.setdefault(field, f"  attribute {field}")
    return sorted(members.values())


def _describe(name: str, value: Any) -> list[str]:
    if hasattr(value, "__supertype__"):
        return [f"newtype {name}"]
    if inspect.isclass(value):
        init = vars(value).get("__init__")
        own_init = init is not None and (getattr(init, "__module__", "") or "").startswith("dshkit")
        return [f"class {name}{_parameters(init) if own_init else ''}", *_own_members(value)]
    if type(value).__module__ in _ALIAS_MODULES:
        return [f"alias {name}"]
    if callable(value):
        return [f"function {name}{_parameters(value)}"]
    return [f"constant {name}: {type(value).__name__}"]


def public_api() -> str:
    """The snapshot text: every public package's exports, described."""
    lines: list[str] = []
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        lines.append(f"[{package}]")
        for name in module.__all__:
            lines.extend(_describe(name, getattr(module, name)))
        lines.append("")
    return "\n".join(lines)


def test_public_api_matches_the_snapshot() -> None:
    current = public_api()
    if os.environ.get("DSHKIT_WRITE_API_SNAPSHOT"):
        SNAPSHOT.write_text(current, encoding="utf-8")
    expected = SNAPSHOT.read_text(encoding="utf-8")
    if current != expected:
        diff = "\n".join(difflib.unified_diff(expected.splitlines(), current.splitlines(), "snapshot", "now", lineterm=""))
        pytest.fail(
            "the public API changed; if that is intended, write the snapshot again with "
            "DSHKIT_WRITE_API_SNAPSHOT=1 python -m pytest tests/packaging/test_public_api.py\n" + diff
        )


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_all_is_sorted_unique_and_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = list(module.__all__)
    assert names == sorted(names), f"{package}.__all__ is not sorted"
    assert len(names) == len(set(names)), f"{package}.__all__ repeats a name"
    missing = [name for name in names if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not have: {missing}"
    private = [name for name in names if name.startswith("_") and name != "__version__"]
    assert not private, f"{package}.__all__ exports private names: {private}"


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_every_export_has_a_docstring(package: str) -> None:
    module = importlib.import_module(package)
    undocumented = [
        name
        for name in module.__all__
        if (inspect.isclass(value := getattr(module, name)) or inspect.isfunction(value)) and not inspect.getdoc(value)
    ]
    assert not undocumented, f"{package}: exports without a docstring: {undocumented}"


@pytest.mark.parametrize("package", sorted(ENGINE_PARTS))
def test_engine_parts_are_not_exported(package: str) -> None:
    exported = set(importlib.import_module(package).__all__) & ENGINE_PARTS[package]
    assert not exported, f"{package} exports engine parts: {sorted(exported)}"


def test_a_public_package_exports_only_its_own_layer() -> None:
    # A public face may define its names or re-export its own engine's, never another package's.
    foreign = []
    for package in PUBLIC_PACKAGES[2:]:
        module = importlib.import_module(package)
        top = package.split(".")[:2]
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                owner = value.__module__
                if not owner.startswith("dshkit._core") and owner.split(".")[:2] != top:
                    foreign.append(f"{package}.{name} (defined in {owner})")
    assert not foreign, foreign


@pytest.mark.parametrize("package", ["agent", "session"])
def test_the_engine_is_private_by_name(package: str) -> None:
    # Each of these packages keeps its engine in `_`-named modules and folders; the modules a user
    # imports are few (the public face), and none of them lives inside an engine folder.
    root = PACKAGE / package
    engine = [path for path in root.rglob("*.py") if any(part.startswith("_") and part != "__init__.py" for part in path.relative_to(root).parts)]
    assert engine, f"dshkit.{package} has no private engine modules"
    face = sorted(path.stem for path in root.glob("*.py") if not path.name.startswith("_"))
    assert len(face) <= 14, f"dshkit.{package}'s public face has grown to {len(face)} modules: {face}"
