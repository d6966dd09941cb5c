"""Session stores, and the one place a location selects one: `open_store` (`choose_store` to ask first).

Each store lives in a module of its own and is imported only when a location selects it, so this
module imports none of them: a store module imports `dshkit.session.stores.protocol` (and a
backend's own optional dependency, lazily) without any import circle. A new store joins by
adding its module and one entry to `_BY_SUFFIX` (a file suffix) or `_BY_SCHEME` (a URL scheme),
and by passing the contract suite `tests/session/stores/test_store_contract.py`. Nothing outside this
package tests a location's suffix or scheme (`tests/packaging/test_layout.py` checks it).

An existing file is also recognised by its first bytes: a log of the original TypeScript harness
(its JSONL header, Zstandard frames, or its SQLite database of schema 17) selects the stores
`dsh_jsonl` / `dsh_sqlite`, which carry that format (`log_format`) so `Session.open` reads it.
`format="dsh"` selects the original's JSONL store for a new log. Those stores live with the rest
of the original format in `dshkit.session.dsh` (`jsonl_store`, `sqlite_store`), and, like the
recognition of the original's first bytes (`dshkit.session.dsh.detect`), are imported only when a
location needs them: this package imports nothing of `dshkit.session.dsh` at module level.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import NamedTuple

from dshkit.session.stores.protocol import DURABILITY_MODES, SessionStore, check_durability, check_store


class StoreChoice(NamedTuple):
    """The store a location selects (`choose_store`), before anything is opened."""

    name: str  # "jsonl", "sqlite", "postgres", "dsh_jsonl" or "dsh_sqlite"
    module: str
    class_name: str
    holds_many: bool  # a database of many sessions: `session_id` picks one
    is_url: bool


_JSONL = StoreChoice("jsonl", "dshkit.session.stores.jsonl", "JsonlStore", False, False)
_SQLITE = StoreChoice("sqlite", "dshkit.session.stores.sqlite", "SqliteStore", False, False)
_POSTGRES = StoreChoice("postgres", "dshkit.session.stores.postgres", "PostgresStore", True, True)
_ORIGINAL_JSONL = StoreChoice("dsh_jsonl", "dshkit.session.dsh.jsonl_store", "DshJsonlStore", False, False)
_ORIGINAL_SQLITE = StoreChoice("dsh_sqlite", "dshkit.session.dsh.sqlite_store", "DshSqliteStore", True, False)

_BY_SUFFIX = {".jsonl": _JSONL, ".sqlite": _SQLITE, ".db": _SQLITE}
_BY_SCHEME = {"postgresql": _POSTGRES, "postgres": _POSTGRES}  # URL scheme (before "://") -> a server database
_ORIGINAL_SUFFIXES = (".jsonl", ".jsonl.zstd")  # a new original-format log; `.zstd`: compressed
FORMATS = ("dshkit", "dsh")


def _url_scheme(text: str) -> str | None:
    scheme, separator, _ = text.partition("://")
    return scheme.lower() if separator else None


def choose_store(location: str | os.PathLike[str], *, format: str | None = None) -> StoreChoice | None:  # noqa: A002
    """Which store `location` selects, or `None` for a local path no store reads; opens nothing.

    A `postgresql://` URL selects PostgreSQL; an existing original-harness log its own store (by
    its first bytes); a `.jsonl` path JSON Lines, a `.sqlite`/`.db` path SQLite. `format="dsh"`
    selects the original's JSONL for a new `.jsonl`/`.jsonl.zstd` path. `ValueError` for a URL of
    an unknown scheme, an unknown `format`, or `format="dsh"` with another kind of path.
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"format must be 'dshkit' or 'dsh', not {format!r}")
    text = os.fspath(location)
    scheme = _url_scheme(text)
    if scheme is not None:
        if scheme not in _BY_SCHEME:
            schemes = ", ".join(f"{known}://" for known in _BY_SCHEME)
            raise ValueError(f"cannot tell the store from {text!r}: the URL schemes are {schemes}")
        return _BY_SCHEME[scheme]
    from dshkit.session.dsh.detect import original_kind  # the original's format: only when a location is read

    kind = original_kind(text)
    if kind is not None:
        return _ORIGINAL_SQLITE if kind == "sqlite" else _ORIGINAL_JSONL
    if format == "dsh":
        if not text.lower().endswith(_ORIGINAL_SUFFIXES):
            raise ValueError(f"an original-format log is a .jsonl or .jsonl.zstd file, not {text!r}")
        return _ORIGINAL_JSONL
    return _BY_SUFFIX.get(Path(text).suffix.lower())


def open_store(
    location: str | os.PathLike[str],
    *,
    session_id: str | None = None,
    format: str | None = None,  # noqa: A002 - the contract's name
) -> SessionStore:
    """The store `location` selects (`choose_store`), for the session `session_id` where it holds many.

    A `postgresql://` URL holds many sessions (`session_id=None` when creating: the session mints
    one), and so does an original-harness SQLite database (read-only; `session_id` required); any
    other file holds one log, and `session_id` is left for `Session.open` to check against its
    header. `ValueError` if no store reads `location` (pass `store=` to `Session.create` /
    `Session.open` then).
    """
    choice = choose_store(location, format=format)
    if choice is None:
        raise ValueError(
            f"cannot tell the store from {os.fspath(location)!r}: use a .jsonl, .sqlite or .db path, "
            "a postgresql:// URL, or pass store="
        )
    store_class = getattr(importlib.import_module(choice.module), choice.class_name)
    if not choice.holds_many:
        return store_class(location)  # type: ignore[no-any-return]
    if choice is _ORIGINAL_SQLITE and session_id is None:
        raise ValueError(
            f"{os.fspath(location)} is an original-harness SQLite database holding many sessions: pass session_id= "
            "(dshkit.session.list_original_sessions lists them)"
        )
    return store_class(os.fspath(location) if choice.is_url else location, session_id)  # type: ignore[no-any-return]


def resolve_store(
    path: str | os.PathLike[str] | None,
    store: SessionStore | None,
    session_id: str | None = None,
    *,
    format: str | None = None,  # noqa: A002 - the contract's name
) -> SessionStore | None:
    """`Session.create`/`open`'s arguments: the store `path` selects (`open_store`), or `store` as given."""
    if store is not None and path is not None:
        raise ValueError("pass a path or a store, not both")
    if path is not None:
        return open_store(path, session_id=session_id, format=format)
    if session_id is not None and store is not None:
        raise ValueError(
            "session_id= picks a session of a location (a postgresql:// URL or an original-harness "
            "SQLite database): pass its path; a store= holds one session already"
        )
    return None if store is None else check_store(store)


def known_suffixes(*, writable: bool = False) -> tuple[str, ...]:
    """The file suffixes that select a store (``.jsonl``, ``.sqlite``, ..., the original's ``.zstd``),
    for messages to users; `writable`: only those a new log can be created with (not ``.zstd``)."""
    return tuple(_BY_SUFFIX) if writable else (*_BY_SUFFIX, ".zstd")


def is_url(location: str | os.PathLike[str]) -> bool:
    """Whether `location` names a server (``scheme://...``) rather than a local file."""
    return _url_scheme(os.fspath(location)) is not None


def log_stem(path: str | os.PathLike[str]) -> str:
    """`path` without its log suffix (``.jsonl``, ``.jsonl.zstd``, ``.sqlite``, ``.db``), to name a file beside it."""
    text = os.fspath(path)
    for suffix in (".zstd", *_BY_SUFFIX):
        if text.lower().endswith(suffix):
            text = text[: -len(suffix)]
    return text


def sibling_location(store: SessionStore, session_id: str, *, same_kind: bool = True) -> str | Path | None:
    """Where a new dshkit log named `session_id` goes beside `store`'s log: the same folder and kind
    of file (JSON Lines when `same_kind` is false or the file is no dshkit kind), the same
    database for a server store; `None` when `store` names no place."""
    path = store.path
    if path is not None:
        keep = same_kind and path.suffix.lower() in _BY_SUFFIX
        return path.with_name(session_id + (path.suffix if keep else ".jsonl"))
    return store.url


def in_folder(location: str | os.PathLike[str], session_id: str) -> str | Path:
    """`location` itself when it is a server URL, else the JSON Lines log `session_id` in the folder
    `location` (`NotADirectoryError` if it is none)."""
    if _url_scheme(os.fspath(location)) is not None:
        choose_store(location)  # an unknown scheme is a ValueError here, not a folder name
        return os.fspath(location)
    folder = Path(location)
    if not folder.is_dir():
        raise NotADirectoryError(f"{os.fspath(location)!r} is not a folder (or a postgresql:// URL)")
    return folder / f"{session_id}.jsonl"


__all__ = [
    "DURABILITY_MODES",
    "SessionStore",
    "StoreChoice",
    "check_durability",
    "check_store",
    "choose_store",
    "in_folder",
    "is_url",
    "known_suffixes",
    "log_stem",
    "open_store",
    "resolve_store",
    "sibling_location",
]
