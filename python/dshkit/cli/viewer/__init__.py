"""`dshkit log html LOG [-o FILE]`: a session log as one self-contained HTML page (see docs/viewer.md).

The page itself is built by `dshkit.viewer` (below `cli`, so `dshkit.serve` serves it too)."""

from __future__ import annotations

import os
import tempfile
from typing import TextIO

from dshkit.session.session import Session
from dshkit.session.stores import is_url, log_stem
from dshkit.viewer import session_page

__all__ = ["default_output", "html_command", "session_page", "write_whole"]  # session_page: dshkit.viewer's


def default_output(path: str, session_id: str) -> str:
    """Where `dshkit log html` writes without `-o`: beside a log file, in the current directory for a URL."""
    if is_url(path):
        return f"{session_id}.html"
    return log_stem(path) + ".html"


def write_whole(path: str, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same directory: the page appears whole or not at all."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".dshkit-page-", suffix=".html", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp's 0600 would hide the page from a web server
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def html_command(session: Session, path: str, output: str | None, out: TextIO) -> int:
    """Write the page of `session` (opened from `path`) to `output`; prints where it went."""
    target = output or default_output(path, session.id)
    write_whole(target, session_page(session, where=path))
    print(f"{target}: {len(session.events)} events", file=out)
    return 0
