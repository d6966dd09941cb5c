"""Session stores, and which store a location selects (`store_for_path`).

Each store lives in a module of its own and is imported only when a location selects it, so this
module imports none of them: a store module imports `dshkit.session.stores.protocol` (and a
backend's own optional dependency, lazily) without any import circle. A new store joins by
adding its module and one entry to `_BY_SUFFIX` (a file suffix) or `_BY_SCHEME` (a URL scheme,
for example `"postgresql": ("dshkit.session.stores.postgres", "PostgresStore")`), and by passing
the contract suite `tests/session/test_store_contract.py`.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from dshkit.session.stores.protocol import DURABILITY_MODES, SessionStore, check_durability

# Where each store class lives: (module, class name), imported when first selected.
_BY_SUFFIX: dict[str, tuple[str, str]] = {
    ".jsonl": ("dshkit.session.stores.jsonl", "JsonlStore"),
    ".sqlite": ("dshkit.session.stores.sqlite", "SqliteStore"),
    ".db": ("dshkit.session.stores.sqlite", "SqliteStore"),
}
_BY_SCHEME: dict[str, tuple[str, str]] = {  # URL scheme (before "://") -> store: a server database
    "postgresql": ("dshkit.session.stores.postgres", "PostgresStore"),
    "postgres": ("dshkit.session.stores.postgres", "PostgresStore"),
}


def _selected(location: str | os.PathLike[str]) -> tuple[str, str] | None:
    text = os.fspath(location)
    scheme, separator, _ = text.partition("://")
    if separator and scheme.lower() in _BY_SCHEME:
        return _BY_SCHEME[scheme.lower()]
    return _BY_SUFFIX.get(Path(text).suffix.lower())


def known_suffixes() -> tuple[str, ...]:
    """The file suffixes that select a store (``.jsonl``, ``.sqlite``, ...), for messages to users."""
    return tuple(_BY_SUFFIX)


def store_for_path(location: str | os.PathLike[str]) -> SessionStore:
    """The store a location selects: a `.jsonl` path JSON Lines, a `.sqlite`/`.db` path SQLite.

    `ValueError` if nothing is selected (pass `store=` to `Session.create`/`Session.open` then).
    """
    selected = _selected(location)
    if selected is None:
        raise ValueError(
            f"cannot tell the store from {os.fspath(location)!r}: use a .jsonl, .sqlite or .db path, or pass store="
        )
    module_name, class_name = selected
    store_class = getattr(importlib.import_module(module_name), class_name)
    return store_class(location)  # type: ignore[no-any-return]


def store_for_location(location: str | os.PathLike[str], session_id: str | None = None) -> SessionStore:
    """The store a location selects, for the session `session_id` where the store holds many.

    A `postgresql://` URL selects one session of a database by `session_id` (`None` when
    creating: the session mints one); a file path holds one log and needs none.
    """
    selected = _selected(location)
    text = os.fspath(location)
    if selected is None and "://" in text:
        schemes = ", ".join(f"{scheme}://" for scheme in _BY_SCHEME)
        raise ValueError(f"cannot tell the store from {text!r}: the URL schemes are {schemes}")
    if selected is not None and selected[0] == _BY_SCHEME["postgresql"][0]:
        module_name, class_name = selected
        return getattr(importlib.import_module(module_name), class_name)(text, session_id)  # type: ignore[no-any-return]
    return store_for_path(location)


__all__ = [
    "DURABILITY_MODES",
    "SessionStore",
    "check_durability",
    "known_suffixes",
    "store_for_location",
    "store_for_path",
]
