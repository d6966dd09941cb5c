"""The `dshkit` command line: `demo`, `log show|verify|messages|convert`, `chat`.

The top layer: each command is a module of this package (`dshkit.cli.demo`, `.log`, `.chat`)
imported only when used, so that `dshkit log verify` does not import the agent or HTTP stack.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dshkit", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="run the offline demonstration")
    demo.add_argument("--log", metavar="PATH", help="where to write the session log")

    log = commands.add_parser("log", help="inspect a session log")
    log_commands = log.add_subparsers(dest="log_command", required=True, metavar="ACTION")
    for name, help_text in (
        ("show", "a readable transcript"),
        ("verify", "check the log's invariants (exit 1 on any problem)"),
        ("messages", "the derived messages, one JSON object per line"),
    ):
        action = log_commands.add_parser(name, help=help_text)
        action.add_argument("path", metavar="PATH")
    convert = log_commands.add_parser("convert", help="rewrite a log in dshkit's or the original harness's format")
    convert.add_argument("path", metavar="SRC")
    convert.add_argument("dest", metavar="DEST")
    convert.add_argument("--format", choices=("dshkit", "dsh"), default="dshkit", help="the format of DEST")
    convert.add_argument("--session-id", help="which session of an original-harness SQLite database")

    chat = commands.add_parser("chat", help="chat with a model over HTTP (DSHKIT_* env)")
    chat.add_argument(
        "--api",
        choices=("chat", "anthropic", "responses"),
        default=None,
        help="wire format: chat (Chat Completions, the default), anthropic (Messages) or responses; env DSHKIT_API",
    )
    chat.add_argument("--log", metavar="PATH", help="session log to write (default: a new file)")
    chat.add_argument("--system", metavar="TEXT", help="system prompt")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from dshkit.cli.demo import main as run_demo

        return run_demo(args)
    if args.command == "log":
        from dshkit.cli.log import main as run_log

        return run_log(args)
    if args.command == "chat":
        from dshkit.cli.chat import main as run_chat

        return run_chat(args)
    raise AssertionError(args.command)  # argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
