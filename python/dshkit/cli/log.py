"""`dshkit log show|verify|messages|html|serve PATH [--session ID]`, `dshkit log list LOCATION` (inspect logs without changing them) and `dshkit log convert SRC DEST`."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TextIO

from dshkit.session.catalog import list_sessions
from dshkit.session.dsh.convert import convert_log
from dshkit.session.errors import SessionError, SessionIntegrityWarning, SessionRecoveryWarning
from dshkit.session.session import Session
from dshkit.session.stores import choose_store, known_suffixes
from dshkit.session.transcript import render
from dshkit.session.verify import check_attachments, check_events, format_problems


def _open(path: str, problems: list[str], session_id: str | None) -> Session:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SessionRecoveryWarning)
        warnings.simplefilter("ignore", SessionIntegrityWarning)  # `verify` lists each broken record itself
        session = Session.open(path, read_only=True, session_id=session_id)
    problems.extend(str(warning.message) for warning in caught if issubclass(warning.category, SessionRecoveryWarning))
    return session


SHOWN_PROBLEMS = 50  # `verify` prints this many problems unless told --all


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def list_command(location: str, out: TextIO, err: TextIO) -> int:
    """Print one line per session at `location`, newest first; returns the exit code."""
    try:
        infos = list_sessions(location)
    except (OSError, SessionError, ValueError, ImportError) as error:
        print(f"dshkit log list: {error}", file=err)
        return 1
    for info in infos:
        link = "subagent of" if info.origin == "subagent" else "fork of"
        parent = f"  {link} {info.parent_id}" if info.parent_id else ""
        print(f"{info.id}  {info.event_count:>7} events  created {_when(info.created_at)}  updated {_when(info.updated_at)}{parent}", file=out)
    return 0


def _unusable(path: str) -> str | None:
    """Why `path` cannot be a session log, phrased for a shell user; ``None`` when it may be one."""
    try:
        chosen = choose_store(path)
    except ValueError:  # a URL of no known scheme: opening it says so
        return None
    if chosen is not None and chosen.is_url:  # a database: the store itself says what is wrong
        return None
    if os.path.isdir(path):
        return f"{path}: is a directory; give the log file inside it"
    if not os.path.exists(path):
        return f"{path}: no such file"
    if chosen is None:
        *others, last = known_suffixes()
        kinds = f"{', '.join(others)} or {last}" if others else last
        return (
            f"{path}: expected a session log file ending in {kinds} (the store is chosen by the name); "
            "if this file is a dshkit log, rename or link it to such a name"
        )
    return None


def run(
    command: str,
    path: str,
    out: TextIO,
    err: TextIO,
    session_id: str | None = None,
    *,
    all_problems: bool = False,
    output: str | None = None,
) -> int:
    """Run one log command; returns the exit code (0 ok, 1 problem found or unreadable log).

    `verify` prints the first `SHOWN_PROBLEMS` problems, a count of the rest and a one-line
    summary; `all_problems` prints every one. `html` writes the viewer page to `output`.
    """
    if command == "list":
        return list_command(path, out, err)
    problems: list[str] = []
    reason = _unusable(path)
    if reason is not None:
        print(f"dshkit log {command}: {reason}", file=err)
        return 1
    try:
        session = _open(path, problems, session_id)
    except OSError as error:
        print(f"dshkit log {command}: {path}: {error.strerror or error}", file=err)
        return 1
    except (SessionError, ValueError, ImportError) as error:
        print(f"dshkit log {command}: {error}", file=err)
        return 1
    with session:
        if command == "show":
            lines = render(session.events, session_id=session.id, created_at=session.created_at, where=path, header=session.stored_header)
            for line in lines:
                print(line, file=out)
            print(_meter_line(session), file=out)
            for problem in problems:
                print(f"warning: {problem}", file=err)
            return 0
        if command == "html":
            from dshkit.cli.viewer import html_command

            try:
                code = html_command(session, path, output, out)
            except OSError as error:
                print(f"dshkit log html: {error}", file=err)
                return 1
            for problem in problems:  # a torn last line the page leaves out, as `show` does
                print(f"warning: {problem}", file=err)
            return code
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
            problems.extend(format_problems(check_attachments(session.events, session.attachments), store.describe, path))
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


def _meter_line(session: Session) -> str:
    """What the token meter reads for the log's next request (provider usage plus the estimate)."""
    from dshkit.agent.tokens import TokenMeter, format_tokens

    try:
        meter = TokenMeter(session)
        reading = meter.reading()
    except SessionError as error:  # a log whose history cannot be derived
        return f"next request: unknown ({error})"
    basis = "provider usage + estimate" if meter.provider_based else "estimate"
    return f"next request: {format_tokens(reading)} tokens ({reading}, {basis})"


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


def serve(path: str, session_id: str | None, host: str, port: int, out: TextIO, err: TextIO) -> int:
    """`dshkit log serve`: the viewer page, live, on loopback; a log that cannot be read fails first."""
    from dshkit.cli.viewer.serve import serve_command

    reason = _unusable(path)
    if reason is not None:
        print(f"dshkit log serve: {reason}", file=err)
        return 1
    try:
        return serve_command(path, session_id, host, port, out, err)
    except OSError as error:
        print(f"dshkit log serve: {path}: {error.strerror or error}", file=err)
        return 1
    except (SessionError, ValueError, ImportError) as error:
        print(f"dshkit log serve: {error}", file=err)
        return 1


def main(args: argparse.Namespace) -> int:
    """Entry point of `dshkit log`: `args.log_command`, `args.path`, `args.session`, `args.all` (`args.dest` for convert)."""
    if args.log_command == "convert":
        return convert(args.path, args.dest, args.format, sys.stderr, session_id=args.session_id)
    if args.log_command == "serve":
        return serve(args.path, args.session, args.host, args.port, sys.stdout, sys.stderr)
    return run(
        args.log_command,
        args.path,
        sys.stdout,
        sys.stderr,
        getattr(args, "session", None),
        all_problems=getattr(args, "all", False),
        output=getattr(args, "output", None),
    )
