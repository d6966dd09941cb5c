"""A real child killed (SIGKILL) in the middle of `attach`: what it left in `attachments/tmp` goes.

The child stops inside the folder backend's write (its temporary file written, fsynced and
locked, not yet linked into place) and says so; the test then kills it, or lets it finish.
Opening a session for writing removes the temporaries of dead writers and never a live one's.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dshkit.session import Session

from tests.support import DSHKIT_PATH

DATA = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64

CHILD = textwrap.dedent(
    """
    import sys
    import dshkit.session.stores.attachment_folder as folder
    from dshkit.session import Session

    write = folder._write_locked

    def write_then_wait(fd, data):
        write(fd, data)
        print("written", flush=True)
        sys.stdin.readline()  # held here, the temporary locked and not yet linked, until told (or killed)

    folder._write_locked = write_then_wait
    with Session.open(sys.argv[1]) as session:
        session.attach(bytes.fromhex(sys.argv[2]), "image/png")
    print("attached", flush=True)
    """
)

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


def _attaching_child(log: Path) -> subprocess.Popen[str]:
    """A child that attaches `DATA` to the log and stops inside the write (it printed "written")."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(log), DATA.hex()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": DSHKIT_PATH},
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "written\n"
    return child


def _temporaries(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "attachments" / "tmp").iterdir())


def test_a_killed_attach_leaves_nothing_once_a_writer_opens(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    Session.create(log).close()
    child = _attaching_child(log)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    (left,) = _temporaries(tmp_path)
    assert left.read_bytes() == DATA  # whole here, but never published
    digest = hashlib.sha256(DATA).hexdigest()
    assert not (tmp_path / "attachments" / "objects" / digest[:2] / digest).exists()
    with Session.open(log, read_only=True):
        assert _temporaries(tmp_path) == [left]  # a reader never writes, nor deletes
    with Session.open(log) as session:
        assert _temporaries(tmp_path) == []
        block = session.attach(DATA, "image/png")
        assert session.attachments.read(block["attachment"]["id"]) == DATA
    assert _temporaries(tmp_path) == []


def test_a_live_writers_temporary_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    Session.create(log).close()
    child = _attaching_child(log)
    try:
        (live,) = _temporaries(tmp_path)
        with Session.create(tmp_path / "other.jsonl"):  # shares the folder `attachments/`
            assert _temporaries(tmp_path) == [live]
        out, _ = child.communicate("go\n", timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
    assert out == "attached\n" and child.returncode == 0
    assert _temporaries(tmp_path) == []
    with Session.open(log, read_only=True) as session:
        assert session.attachments.read("sha256:" + hashlib.sha256(DATA).hexdigest()) == DATA
