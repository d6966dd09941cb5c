"""Session stores, and which store a location selects (`store_for_path`).

Each store lives in a module of its own and is imported only when a location selects it, so this
module imports none of them: a store module imports `dshkit.session.stores.protocol` (and a
backend's own optional dependency, lazily) without any import circle. A new store joins by
adding its module and one entry to `_BY_SUFFIX` (a file suffix) or `_BY_SCHEME` (a URL scheme,
for example `"postgresql": ("dshkit.session.stores.postgres", "PostgresStore")`), and by passing
the contract suite `tests/session/test_store_contract.py`.

An existing file is also recognised by its first bytes: a log of the original TypeScript harness
(its JSONL header, Zstandard frames, or its SQLite database of schema 17) selects the stores
`dsh_jsonl` / `dsh_sqlite`, which carry that format (`log_format`) so `Session.open` reads it.
`format="dsh"` selects the original's JSONL store for a new log.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from dshkit.session.dsh.detect import original_kind
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
_ORIGINAL_JSONL = ("dshkit.session.stores.dsh_jsonl", "DshJsonlStore")
_ORIGINAL_SQLITE = ("dshkit.session.stores.dsh_sqlite", "DshSqliteStore")
_ORIGINAL_SUFFIXES = (".zstd",)  # the original's compressed JSONL, `session.jsonl.zstd`
FORMATS = ("dshkit", "dsh")


def _selected(location: str | os.PathLike[str]) -> tuple[str, str] | None:
    text = os.fspath(location)
    scheme, separator, _ = text.partition("://")
    if separator and scheme.lower() in _BY_SCHEME:
        return _BY_SCHEME[scheme.lower()]
    return _BY_SUFFIX.get(Path(text).suffix.lower())


def _original_store(text: str, format: str | None, session_id: str | None) -> tuple[str, str] | None:  # noqa: A002
    """The original-format store a local path selects, if any (by its bytes, or `format` for a new log)."""
    kind = original_kind(text)
    if kind == "sqlite":
        if session_id is None:
            raise ValueError(
                f"{text} is an original-harness SQLite database holding many sessions: pass session_id= "
                "(dshkit.session.list_original_sessions lists them)"
            )
        return _ORIGINAL_SQLITE
    if session_id is not None:
        raise ValueError(f"session_id= picks a session of an original-harness SQLite database; {text} is none")
    if kind is not None:
        return _ORIGINAL_JSONL
    if format == "dsh":
        if not text.lower().endswith((".jsonl", ".jsonl.zstd")):
            raise ValueError(f"an original-format log is a .jsonl or .jsonl.zstd file, not {text!r}")
        return _ORIGINAL_JSONL
    return None


def known_suffixes() -> tuple[str, ...]:
    """The file suffixes that select a store (``.jsonl``, ``.sqlite``, ..., the original's ``.zstd``), for messages to users."""
    return (*_BY_SUFFIX, *_ORIGINAL_SUFFIXES)


def store_for_path(
    location: str | os.PathLike[str],
    *,
    format: str | None = None,  # noqa: A002 - the contract's name
    session_id: str | None = None,
) -> SessionStore:
    """The store a location selects: a `.jsonl` path JSON Lines, a `.sqlite`/`.db` path SQLite.

    An existing original-harness log selects the original's stores (its SQLite database needs
    `session_id`); `format="dsh"` selects the original's JSONL for a new `.jsonl`/`.jsonl.zstd`
    path. `ValueError` if nothing is selected (pass `store=` to `Session.create`/`Session.open` then).
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"format must be 'dshkit' or 'dsh', not {format!r}")
    text = os.fspath(location)
    selected = None
    arguments: tuple[object, ...] = (location,)
    if "://" not in text:
        selected = _original_store(text, format, session_id)
        if selected is _ORIGINAL_SQLITE:
            arguments = (location, session_id)
    elif session_id is not None:
        raise ValueError("session_id= picks a session of an original-harness SQLite database (a local path)")
    selected = selected or _selected(location)
    if selected is None:
        raise ValueError(
            f"cannot tell the store from {text!r}: use a .jsonl, .sqlite or .db path, or pass store="
        )
    module_name, class_name = selected
    store_class = getattr(importlib.import_module(module_name), class_name)
    return store_class(*arguments)  # type: ignore[no-any-return]


def store_for_location(
    location: str | os.PathLike[str],
    session_id: str | None = None,
    *,
    format: str | None = None,  # noqa: A002 - the contract's name
) -> SessionStore:
    """The store a location selects, for the session `session_id` where the store holds many.

    A `postgresql://` URL selects one session of a database by `session_id` (`None` when
    creating: the session mints one), and so does an original-harness SQLite database (recognised
    by its first bytes, read-only); any other file path holds one log (`Session.open` checks a
    `session_id` against its header). `format="dsh"` selects the original's JSONL for a new log.
    """
    text = os.fspath(location)
    if "://" not in text:
        original_sqlite = original_kind(text) == "sqlite"
        return store_for_path(location, format=format, session_id=session_id if original_sqlite else None)
    selected = _selected(location)
    if selected is None:
        schemes = ", ".join(f"{scheme}://" for scheme in _BY_SCHEME)
        raise ValueError(f"cannot tell the store from {text!r}: the URL schemes are {schemes}")
    if selected is not None and selected[0] == _BY_SCHEME["postgresql"][0]:
        module_name, class_name = selected
        return getattr(importlib.import_module(module_name), class_name)(text, session_id)  # type: ignore[no-any-return]
    return store_for_path(location, format=format)


def resolve_store(
    path: str | os.PathLike[str] | None,
    store: SessionStore | None,
    session_id: str | None = None,
    *,
    format: str | None = None,  # noqa: A002 - the contract's name
) -> SessionStore | None:
    """The store `path` selects, or `store` as given (`None` for neither); `ValueError` for both."""
    if store is not None and path is not None:
        raise ValueError("pass a path or a store, not both")
    if path is not None:
        return store_for_location(path, session_id, format=format)
    if session_id is not None and store is not None:
        raise ValueError(
            "session_id= picks a session of a location (a postgresql:// URL or an original-harness "
            "SQLite database): pass its path; a store= holds one session already"
        )
    return store


__all__ = [
    "DURABILITY_MODES",
    "SessionStore",
    "check_durability",
    "known_suffixes",
    "resolve_store",
    "store_for_location",
    "store_for_path",
]
