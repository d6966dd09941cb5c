"""`dshkit log show|verify|messages PATH`: inspect a session log without changing it."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import TextIO

from dshkit.session.errors import SessionError, SessionIntegrityWarning, SessionRecoveryWarning
from dshkit.session.session import Session
from dshkit.session.transcript import render
from dshkit.session.verify import check_events, format_problems


def _open(path: str, problems: list[str]) -> Session:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SessionRecoveryWarning)
        warnings.simplefilter("ignore", SessionIntegrityWarning)  # `verify` lists each broken record itself
        session = Session.open(path, read_only=True)
    problems.extend(str(warning.message) for warning in caught if issubclass(warning.category, SessionRecoveryWarning))
    return session


SHOWN_PROBLEMS = 50  # `verify` prints this many problems unless told --all


def run(command: str, path: str, out: TextIO, err: TextIO, *, all_problems: bool = False) -> int:
    """Run one log command; returns the exit code (0 ok, 1 problem found or unreadable log).

    `verify` prints the first `SHOWN_PROBLEMS` problems, a count of the rest and a one-line
    summary; `all_problems` prints every one.
    """
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
            shown = problems if all_problems else problems[:SHOWN_PROBLEMS]
            for problem in shown:
                print(problem, file=out)
            if problems:
                if len(shown) < len(problems):
                    print(f"... and {len(problems) - len(shown)} more (--all prints every problem)", file=out)
                print(f"{path}: {len(problems)} problem(s) in {len(session.events)} events", file=out)
                return 1
            print(f"{path}: ok ({len(session.events)} events, {len(session.messages())} messages)", file=out)
            return 0
    raise ValueError(f"unknown log command {command!r}")


def main(args: argparse.Namespace) -> int:
    """Entry point of `dshkit log`: `args.log_command`, `args.path` (and `args.all` for verify)."""
    return run(args.log_command, args.path, sys.stdout, sys.stderr, all_problems=getattr(args, "all", False))
