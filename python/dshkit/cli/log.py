"""`dshkit log show|verify|messages PATH`: inspect a session log without changing it."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import TextIO

from dshkit.session.errors import SessionError, SessionRecoveryWarning
from dshkit.session.session import Session
from dshkit.session.stores import known_suffixes
from dshkit.session.transcript import render
from dshkit.session.verify import check_events, format_problems


def _open(path: str, problems: list[str]) -> Session:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SessionRecoveryWarning)
        session = Session.open(path, read_only=True)
    problems.extend(str(warning.message) for warning in caught if issubclass(warning.category, SessionRecoveryWarning))
    return session


def _unusable(path: str) -> str | None:
    """Why `path` cannot be a session log, phrased for a shell user; ``None`` when it may be one."""
    if "://" in path:  # a store URL: the store itself says what is wrong
        return None
    if os.path.isdir(path):
        return f"{path}: is a directory; give the log file inside it"
    if not os.path.exists(path):
        return f"{path}: no such file"
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in known_suffixes():
        *others, last = known_suffixes()
        kinds = f"{', '.join(others)} or {last}" if others else last
        return (
            f"{path}: expected a session log file ending in {kinds} (the store is chosen by the name); "
            "if this file is a dshkit log, rename or link it to such a name"
        )
    return None


def run(command: str, path: str, out: TextIO, err: TextIO) -> int:
    """Run one log command; returns the exit code (0 ok, 1 problem found or unreadable log)."""
    problems: list[str] = []
    reason = _unusable(path)
    if reason is not None:
        print(f"dshkit log {command}: {reason}", file=err)
        return 1
    try:
        session = _open(path, problems)
    except OSError as error:
        print(f"dshkit log {command}: {path}: {error.strerror or error}", file=err)
        return 1
    except (SessionError, ValueError) as error:
        print(f"dshkit log {command}: {error}", file=err)
        return 1
    with session:
        if command == "show":
            for line in render(session.events, session_id=session.id, created_at=session.created_at, where=path):
                print(line, file=out)
            for problem in problems:
                print(f"warning: {problem}", file=err)
            return 0
        if command == "messages":
            try:
                messages = session.messages()
            except SessionError as error:
                print(f"dshkit log messages: {error}", file=err)
                return 1
            for message in messages:
                print(message.to_json(), file=out)
            return 0
        if command == "verify":
            store = session.store
            assert store is not None  # opened from a path
            problems.extend(format_problems(check_events(session.events), store.describe, path))
            for problem in problems:
                print(problem, file=out)
            if problems:
                return 1
            print(f"{path}: ok ({len(session.events)} events, {len(session.messages())} messages)", file=out)
            return 0
    raise ValueError(f"unknown log command {command!r}")


def main(args: argparse.Namespace) -> int:
    """Entry point of `dshkit log`: `args.log_command` and `args.path`."""
    return run(args.log_command, args.path, sys.stdout, sys.stderr)
