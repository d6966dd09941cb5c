"""Whether a path given on the command line can be the log (or page) a command reads or writes.

Each check returns why not, phrased for a shell user (the path, then what is wrong and what to
do, in the command's own options), or ``None``. Commands call them before they start, so a bad
path fails in one line before anything runs or is half written, and no message names a Python
argument or a temporary file.
"""

from __future__ import annotations

import os

from dshkit.session.stores import choose_store, is_url, known_suffixes


def _expected_suffixes() -> str:
    *others, last = known_suffixes()
    return f"{', '.join(others)} or {last}" if others else last


def _shown(path: str) -> str:
    """`path` as a message shows it: a database URL without its password."""
    if not is_url(path):
        return path
    from dshkit.session.stores.postgres import redact

    return redact(path)


def unreadable_log(path: str, session: str | None = None) -> str | None:
    """Why `path` cannot be an existing session log to read, or ``None`` when it may be one."""
    try:
        chosen = choose_store(path)
    except ValueError as error:  # a URL of no known scheme
        return str(error)
    if chosen is not None and chosen.holds_many and session is None:
        shown = _shown(path)
        return f"{shown} holds many sessions: choose one with --session ID (`dshkit log list {shown}` lists them)"
    if chosen is not None and chosen.is_url:  # a database: the store itself says what is wrong
        return None
    if os.path.isdir(path):
        return f"{path}: is a directory; give the log file inside it"
    if not os.path.exists(path):
        return f"{path}: no such file"
    if chosen is None:
        return (
            f"{path}: expected a session log file ending in {_expected_suffixes()} (the store is chosen by the name); "
            "if this file is a dshkit log, rename or link it to such a name"
        )
    return None


def unwritable_new_file(path: str) -> str | None:
    """Why no new file can be written at `path` (it exists, or its folder does not), or ``None``."""
    if os.path.lexists(path) and not os.path.isdir(path):
        return f"{path}: already exists (nothing is overwritten); choose a new name"
    return unwritable_output(path)


def unwritable_output(path: str) -> str | None:
    """Why a file (a page, replaced if it exists) cannot be written at `path`, or ``None``."""
    if os.path.isdir(path):
        return f"{path}: is a directory; give a file name inside it"
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "no such folder"
        return f"{path}: {folder}: {what}"
    return None


def unwritable_new_log(path: str, *, format: str = "dshkit", files_only: bool = False) -> str | None:  # noqa: A002 - the command's option
    """Why a new session log of `format` ("dshkit" or "dsh") cannot be created at `path`, or ``None``.

    `files_only`: the command writes a log file, never to a database URL.
    """
    if is_url(path):
        return f"{_shown(path)}: expected a log file name here, not a database URL" if files_only else None
    try:
        chosen = choose_store(path, format=format if format == "dsh" else None)
    except ValueError:
        chosen = None
    reason = unwritable_new_file(path)
    if reason is not None:
        return reason
    if format == "dsh" and chosen is None:
        return f"{path}: an original-format log is a file ending in .jsonl or .jsonl.zstd"
    if chosen is None or chosen.holds_many:
        plain = ", ".join(known_suffixes(writable=True))
        return f"{path}: a new session log is a file ending in {plain} (the store is chosen by the name)"
    return None


__all__ = ["unreadable_log", "unwritable_new_file", "unwritable_new_log", "unwritable_output"]
