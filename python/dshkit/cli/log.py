"""`dshkit log show|verify|messages PATH`: inspect a session log without changing it."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from typing import TextIO

from dshkit.session.dsh.convert import convert_log
from dshkit.session.errors import SessionError, SessionRecoveryWarning
from dshkit.session.session import Session
from dshkit.session.transcript import render
from dshkit.session.verify import check_events, format_problems


def _open(path: str, problems: list[str]) -> Session:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SessionRecoveryWarning)
        session = Session.open(path, read_only=True)
    problems.extend(str(warning.message) for warning in caught if issubclass(warning.category, SessionRecoveryWarning))
    return session


def run(command: str, path: str, out: TextIO, err: TextIO) -> int:
    """Run one log command; returns the exit code (0 ok, 1 problem found or unreadable log)."""
    problems: list[str] = []
    try:
        session = _open(path, problems)
    except (OSError, SessionError, ValueError) as error:
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


def _progress_bar(err: TextIO) -> Callable[[int, int], None]:
    def show(done: int, total: int) -> None:
        width = 30
        filled = width * done // max(total, 1)
        err.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} events")
        if done >= total:
            err.write("\n")
        err.flush()

    return show


def convert(src: str, dest: str, target_format: str, err: TextIO, *, session_id: str | None = None) -> int:
    """`dshkit log convert`: a progress bar on stderr only when it is a terminal."""
    progress = _progress_bar(err) if err.isatty() else None
    try:
        convert_log(src, dest, format=target_format, session_id=session_id, progress=progress)
    except (OSError, SessionError, ValueError) as error:
        print(f"dshkit log convert: {error}", file=err)
        return 1
    return 0


def main(args: argparse.Namespace) -> int:
    """Entry point of `dshkit log`: `args.log_command` and `args.path` (`args.dest` for convert)."""
    if args.log_command == "convert":
        return convert(args.path, args.dest, args.format, sys.stderr, session_id=args.session_id)
    return run(args.log_command, args.path, sys.stdout, sys.stderr)
