"""What the command line does differently on a terminal: colour, line editing, history, pipes.

Colour follows https://no-color.org: only when the stream is a terminal, and never when
``NO_COLOR`` is set to a non-empty value. Line editing and history use the standard `readline`
module when it exists (not on Windows); the history file lives under ``$XDG_STATE_HOME/dshkit``.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = ["BROKEN_PIPE_EXIT", "LineEditor", "colour_enabled", "quiet_broken_pipe", "state_dir", "warnings_as_lines"]

# A process killed by SIGPIPE is reported by shells as 128 + 13; dshkit exits with the same status
# when the reader of its output goes away (`dshkit log show big.jsonl | head -2`), like `cat` does.
BROKEN_PIPE_EXIT = 141
HISTORY_LENGTH = 1000


def colour_enabled(stream: IO[str], environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour `stream`: a terminal, and no non-empty ``NO_COLOR`` in the environment."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


@contextmanager
def warnings_as_lines(command: str, err: IO[str]) -> Iterator[None]:
    """Print each warning raised inside as one plain line (``dshkit log convert: warning: ...``).

    Python's own display names the library file and source line that warned, which says
    nothing to a shell user; the message itself names the log and the line that was wrong.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for warning in caught:
                print(f"{command}: warning: {warning.message}", file=err, flush=True)


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """dshkit's directory under the user's state directory (``$XDG_STATE_HOME/dshkit``), not created."""
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "dshkit"


def quiet_broken_pipe() -> int:
    """After the reader of standard output went away: silence the final flush, return the exit code.

    Python flushes `sys.stdout` again at exit; pointing the descriptor at the null device makes
    that flush succeed instead of printing a second `BrokenPipeError`.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return BROKEN_PIPE_EXIT


class LineEditor:
    """Reads prompt lines with `readline` editing and a persistent history file.

    Used only when standard input and output are both terminals (that is when `input` uses
    readline). A history file that cannot be read or written is skipped silently: editing still
    works, only the history is not kept.
    """

    def __init__(self, history_file: Path) -> None:
        self.history_file = history_file
        self._readline: Any = None
        try:
            import readline
        except ImportError:  # Windows: plain input() still works
            return
        self._readline = readline
        readline.set_history_length(HISTORY_LENGTH)
        try:
            readline.read_history_file(str(history_file))
        except OSError:  # no history yet
            pass

    @property
    def has_history(self) -> bool:
        """Whether lines are kept in a history file (readline is available)."""
        return self._readline is not None

    def read(self, prompt: str) -> str | None:
        """One line without its newline; ``None`` at end of input (Ctrl-D). Ctrl-C raises."""
        try:
            return input(prompt)
        except EOFError:
            return None

    def save(self) -> None:
        """Write the history file (created with its folder when needed)."""
        if self._readline is None:
            return
        try:
            self.history_file.parent.mkdir(parents=True, exist_ok=True)
            self._readline.write_history_file(str(self.history_file))
        except OSError:
            pass
