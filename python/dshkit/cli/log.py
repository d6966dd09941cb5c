"""`dshkit log show|verify|messages|html|serve PATH [--session ID]`, `dshkit log list LOCATION` (inspect logs without changing them) and `dshkit log convert SRC DEST`."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from dshkit.cli.log_paths import unreadable_log, unwritable_new_log, unwritable_output
from dshkit.cli.terminal import warnings_as_lines
from dshkit.session.catalog import SessionInfo, list_log_files, list_sessions, newest_first
from dshkit.session.dsh.convert import convert_log
from dshkit.session.errors import SessionError, SessionIntegrityWarning, SessionRecoveryWarning
from dshkit.session.session import Session
from dshkit.session.stores import choose_store, is_url
from dshkit.session._transcript import render
from dshkit.session._verify import check_attachments, check_events, format_problems


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
    """Print one line per session at `location`, newest first; returns the exit code.

    In a directory each line starts with the file's name (copies of one session are told apart),
    and a file that cannot be read is listed as such after the others (exit 1), hiding none.
    """
    local = not is_url(location)
    if local and os.path.isdir(location):
        return _list_directory(location, out, err)
    if local and not os.path.exists(location):
        print(f"dshkit log list: {location}: no such directory", file=err)
        return 1
    chosen = choose_store(location) if local else None
    if local and (chosen is None or not chosen.holds_many):
        print(f"dshkit log list: {location}: expected a directory of logs, a postgresql:// URL or an original-harness .db file", file=err)
        return 1
    try:
        infos = list_sessions(location)
    except (OSError, SessionError, ValueError, ImportError) as error:
        print(f"dshkit log list: {error}", file=err)
        return 1
    for info in infos:
        print(_session_line(info), file=out)
    return 0


def _session_line(info: SessionInfo) -> str:
    link = "subagent of" if info.origin == "subagent" else "fork of"
    parent = f"  {link} {info.parent_id}" if info.parent_id else ""
    return f"{info.id}  {info.event_count:>7} events  created {_when(info.created_at)}  updated {_when(info.updated_at)}{parent}"


def _list_directory(directory: str, out: TextIO, err: TextIO) -> int:
    try:
        files = list_log_files(directory)
    except OSError as error:
        print(f"dshkit log list: {directory}: {error.strerror or error}", file=err)
        return 1
    rows = sorted(((log_file.path.name, info) for log_file in files for info in log_file.sessions), key=lambda row: newest_first(row[1]))
    bad = [log_file for log_file in files if log_file.error is not None]
    width = max((len(log_file.path.name) for log_file in files), default=0)
    for name, info in rows:
        print(f"{name:<{width}}  {_session_line(info)}", file=out)
    for log_file in bad:
        print(f"{log_file.path.name:<{width}}  unreadable: {_reason(log_file.error, log_file.path)}", file=out)
    if bad:
        print(f"dshkit log list: {len(bad)} of {len(files)} log files could not be read", file=err)
        return 1
    return 0


def _reason(error: BaseException | None, path: Path) -> str:
    """An error's message without the file's path (the line already starts with its name)."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    text = str(error)
    for prefix in (f"{path}: ", f"{path.name}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


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
    reason = unreadable_log(path, session_id)
    if reason is None and command == "html" and output is not None:
        reason = unwritable_output(output)
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
            return _show(session, path, problems, out, err)
        if command == "html":
            from dshkit.cli.viewer import html_command

            try:
                code = html_command(session, path, output, out)
            except OSError as error:  # strerror only: the error's file is the temporary page beside it
                print(f"dshkit log html: {output or 'the page'}: {error.strerror or error}", file=err)
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
            return _verify(session, path, problems, out, all_problems=all_problems)
    raise ValueError(f"unknown log command {command!r}")


def _show(session: Session, path: str, problems: list[str], out: TextIO, err: TextIO) -> int:
    """`log show`: the transcript and the meter's reading; what the open recovered from, as warnings."""
    lines = render(session.events, session_id=session.id, created_at=session.created_at, where=path, header=session.stored_header)
    for line in lines:
        print(line, file=out)
    print(_meter_line(session), file=out)
    for problem in problems:
        print(f"warning: {problem}", file=err)
    return 0


def _verify(session: Session, path: str, problems: list[str], out: TextIO, *, all_problems: bool) -> int:
    """`log verify`: every invariant and attachment problem (the first `SHOWN_PROBLEMS` unless `all_problems`), then a summary."""
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


def _meter_line(session: Session) -> str:
    """What the token meter reads for the log's next request (provider usage plus the estimate)."""
    from dshkit.agent._compaction.tokens import TokenMeter, format_tokens

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
    """`dshkit log convert`: both paths checked first; a progress bar on stderr only when it is a terminal."""
    reason = unreadable_log(src, session_id) or unwritable_new_log(dest, format=target_format, files_only=True)
    if reason is not None:
        print(f"dshkit log convert: {reason}", file=err)
        return 1
    progress = _progress_bar(err) if err.isatty() else None
    try:
        with warnings_as_lines("dshkit log convert", err):  # a torn last line: one plain line, not Python's display
            convert_log(src, dest, format=target_format, session_id=session_id, progress=progress)
    except OSError as error:  # strerror only: the error's file may be a temporary one beside `dest`
        print(f"dshkit log convert: {dest}: {error.strerror or error}", file=err)
        return 1
    except (SessionError, ValueError) as error:
        print(f"dshkit log convert: {error}", file=err)
        return 1
    return 0


def serve(path: str, session_id: str | None, host: str, port: int, out: TextIO, err: TextIO) -> int:
    """`dshkit log serve`: the viewer page, live, on loopback; a log that cannot be read fails first."""
    from dshkit.cli.viewer.serve import ListenError, serve_command

    reason = unreadable_log(path, session_id)
    if reason is not None:
        print(f"dshkit log serve: {reason}", file=err)
        return 1
    try:
        return serve_command(path, session_id, host, port, out, err)
    except ListenError as error:
        print(f"dshkit log serve: {error.strerror}", file=err)
        return 1
    except OSError as error:
        print(f"dshkit log serve: {path}: {error.strerror or error}", file=err)
        return 1
    except (SessionError, ValueError, ImportError) as error:
        print(f"dshkit log serve: {error}", file=err)
        return 1


def main(args: argparse.Namespace) -> int:
    """Entry point of `dshkit log`: `args.log_command`, `args.path`, `args.session`, `args.all` (`args.dest` for convert)."""
    if args.log_command == "convert":
        return convert(args.path, args.dest, args.format, sys.stderr, session_id=args.session)
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
