"""The `dshkit` command line: `demo`, `log show|verify|messages|html|serve|list|convert`, `chat`, `bench`, `serve`, `worker`.

The top layer: each command is a module of this package (`dshkit.cli.demo`, `.log`, `.chat`,
`.bench`) imported only when used, so that `dshkit log verify` does not import the agent or HTTP
stack. Exit status: 0 success, 1 the command failed, 2 a usage or configuration error, 130 after
Ctrl-C, 141 when the reader of standard output went away (`dshkit log show x.jsonl | head`), the
status shells report for a process ended by SIGPIPE, printed without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


def build_parser() -> argparse.ArgumentParser:
    from dshkit import __version__

    parser = argparse.ArgumentParser(prog="dshkit", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"dshkit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="run the offline demonstration")
    demo.add_argument("--log", metavar="PATH", help="where to write the session log")

    add_log_commands(commands)

    chat = commands.add_parser("chat", help="chat with a model over HTTP (DSHKIT_* env)")
    chat.add_argument(
        "--api",
        choices=("chat", "anthropic", "responses"),
        default=None,
        help="wire format: chat (Chat Completions, the default), anthropic (Messages) or responses; env DSHKIT_API",
    )
    chat.add_argument("--log", metavar="PATH", help="session log to write (default: a new file)")
    chat.add_argument("--system", metavar="TEXT", help="system prompt")
    chat.add_argument(
        "--context-window", type=int, default=None, metavar="TOKENS",
        help="the model's context window: shows [used/window] and compacts the history automatically",
    )

    bench = commands.add_parser(
        "bench", help="what freezing your JSON documents costs, beside deepcopy, json and orjson"
    )
    bench.add_argument("files", nargs="*", metavar="FILE.json", help="JSON documents (default: a built-in one)")
    bench.add_argument("--rounds", type=int, default=None, metavar="N", help="timed rounds per measurement")
    from dshkit.cli.serve import add_serve_commands

    add_serve_commands(commands)
    return parser


def add_log_commands(commands: Any) -> None:
    """``dshkit log show|verify|messages|html|serve|list|convert``: the sub-commands of `commands` reading logs."""
    log = commands.add_parser("log", help="inspect a session log")
    log_commands = log.add_subparsers(dest="log_command", required=True, metavar="ACTION")
    for name, help_text in (
        ("show", "a readable transcript"),
        ("verify", "check the log's invariants (exit 1 on any problem)"),
        ("messages", "the derived messages, one JSON object per line"),
        ("html", "a self-contained HTML page to explore the log in a browser"),
        ("serve", "the same page served on loopback, following the log while it grows"),
    ):
        action = log_commands.add_parser(name, help=help_text)
        action.add_argument("path", metavar="PATH", help="a .jsonl/.sqlite/.db log or a postgresql:// URL")
        add_session_option(action)
        if name == "verify":
            action.add_argument("--all", action="store_true", help="print every problem (default: the first 50)")
        if name == "html":
            action.add_argument("-o", "--output", metavar="FILE", help="where to write the page (default: the log's name with .html)")
        if name == "serve":
            action.add_argument("--port", type=port_number, default=0, help="the port to listen on (default: a free one, printed)")
            action.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1, this machine only)")
    listing = log_commands.add_parser(
        "list", help="the sessions in a directory of logs, a PostgreSQL database or an original-harness SQLite database"
    )
    listing.add_argument("path", metavar="LOCATION", help="a directory, a postgresql:// URL or an original .db file")
    convert = log_commands.add_parser("convert", help="rewrite a log in dshkit's or the original harness's format")
    convert.add_argument("path", metavar="SRC")
    convert.add_argument("dest", metavar="DEST")
    convert.add_argument("--format", choices=("dshkit", "dsh"), default="dshkit", help="the format of DEST")
    add_session_option(convert)


def add_session_option(command: argparse.ArgumentParser) -> None:
    """``--session ID``, spelled so in every command (``--session-id`` is kept, unlisted, as another name)."""
    command.add_argument(
        "--session", metavar="ID",
        help="the session to read (needed for a postgresql:// URL or an original-harness SQLite database)",
    )
    command.add_argument("--session-id", dest="session", help=argparse.SUPPRESS)


def port_number(text: str) -> int:
    """A TCP port from the command line (0 lets the system pick a free one)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535 (0 picks a free one), got {port}")
    return port


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    args = build_parser().parse_args(argv)
    try:
        code = _run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
    except BrokenPipeError:
        from dshkit.cli.terminal import quiet_broken_pipe

        return quiet_broken_pipe()
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    return code


def _run(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from dshkit.cli.demo import main as run_demo

        return run_demo(args)
    if args.command == "log":
        from dshkit.cli.log import main as run_log

        return run_log(args)
    if args.command == "chat":
        from dshkit.cli.chat import main as run_chat

        return run_chat(args)
    if args.command == "bench":
        from dshkit.cli.bench import main as run_bench

        return run_bench(args)
    if args.command in ("serve", "worker"):
        from dshkit.cli.serve import main as run_serve

        return run_serve(args)
    raise AssertionError(args.command)  # argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
