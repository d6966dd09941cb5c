"""JSON Lines on open: torn last lines are cut with a warning, any other bad line is an error."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dshkit.session import Session, SessionCorruptError, SessionRecoveryWarning


@pytest.fixture
def log(tmp_path: Path, build) -> Path:
    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:
        for n in range(5):
            session.append("user/message", build.user(f"m{n}"))
    return path


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize(
    "tail, why",
    [
        (b'{"seq":5,"time":1,"type":"user/mess', "no newline"),
        (b'{"seq":5,"time":1,"type":"turn/start","data":{"turn":1}}', "no newline"),  # complete JSON, no newline
        (b"\x00\x00\x00\x00", "no newline"),
    ],
)
def test_a_torn_last_line_is_cut_with_a_warning(log: Path, tail: bytes, why: str):
    intact = log.read_bytes()
    log.write_bytes(intact + tail)
    with pytest.warns(SessionRecoveryWarning, match=rf"log.jsonl: line 7: torn last line \({why}"):
        session = Session.open(log)
    with session:
        assert [m.text for m in session.messages()] == [f"m{n}" for n in range(5)]
        assert log.read_bytes() == intact
        assert session.append("turn/start", {"turn": 1}).seq == 5
    with Session.open(log) as again:  # clean now: no warning (warnings are errors here)
        assert len(again.events) == 7  # turn/start + the turn/end that closed it


def test_a_version_1_log_cuts_a_last_line_that_is_not_json(legacy_log: Path):
    """Format version 1 has no checksums: a newline-terminated last line that is not JSON is torn."""
    log, tail, why = legacy_log, b'{"seq":5,"ti\n', "not JSON"
    intact = log.read_bytes()
    log.write_bytes(intact + tail)
    with pytest.warns(SessionRecoveryWarning, match=rf"log.jsonl: line 7: torn last line \({why}"):
        session = Session.open(log)
    with session:
        assert [m.text for m in session.messages()] == [f"m{n}" for n in range(5)]
        assert log.read_bytes() == intact
        assert session.append("turn/start", {"turn": 1}).seq == 5
    with Session.open(log) as again:  # clean now: no warning (warnings are errors here)
        assert len(again.events) == 7  # turn/start + the turn/end that closed it


def test_read_only_open_reports_a_torn_line_but_leaves_the_file(log: Path):
    torn = log.read_bytes() + b'{"seq":5'
    log.write_bytes(torn)
    with pytest.warns(SessionRecoveryWarning, match="read-only"):
        Session.open(log, read_only=True).close()
    assert log.read_bytes() == torn


@pytest.mark.parametrize(
    "line, reason",
    [
        (b'{"seq":9,"time":1,"type":"turn/start","data":{"turn":1}}\n', "seq 9 where 2 was expected"),
        (b'{"seq":2,"time":"noon","type":"turn/start","data":{"turn":1}}\n', "'time' must be an int"),
        (b'{"seq":2,"time":1,"type":7,"data":{}}\n', "'type' must be a str"),
        (b'{"seq":2,"time":1,"type":"turn/start"}\n', "no 'data'"),
        (b"[1, 2]\n", "not a JSON object"),
        (b"\n", "not valid JSON"),
        (b'{"seq":2,"time":1,"type":"user/message","data":{"id":"","role":"user","content":[],"source":{"kind":"user"}},"surface_op":"append","source_event_seqs":[]}\n', "bad user/message event"),
        (b'{"seq":2,"time":1,"type":"user/message","data":{"id":"x","role":"user","content":[],"source":{"kind":"user"}},"surface_op":{"op":"replace","start":4,"end":9},"source_event_seqs":[]}\n', "outside the surface"),
        (b'{"seq":2,"time":1,"type":"user/message","data":{"id":"x","role":"user","content":[],"source":{"kind":"user"}}}\n', "needs 'surface_op'"),
    ],
)
def test_bad_records_name_file_line_and_reason(legacy_log: Path, line: bytes, reason: str):
    """Format version 1 (no checksums), so the decoder's own reasons show."""
    log = legacy_log
    content = lines(log)
    content[3] = line
    log.write_bytes(b"".join(content))
    with pytest.raises(SessionCorruptError, match=rf"line 4: .*{reason}"):
        Session.open(log)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"hello world\n",
        b"\x89PNG\r\n\x1a\n\x00\x00binary",
        b'{"type": "other", "version": 1}\n',
        b"[1,2,3]\n",
        b'{"type": "session"}\n',
        b"no newline at all",
    ],
)
def test_a_file_that_is_not_a_dshkit_log_is_refused_cleanly(tmp_path: Path, content: bytes):
    path = tmp_path / "other.jsonl"
    path.write_bytes(content)
    with pytest.raises(SessionCorruptError, match=r"other\.jsonl: line 1"):
        Session.open(path)
    assert path.read_bytes() == content


def test_a_newer_format_version_is_refused(tmp_path: Path):
    path = tmp_path / "new.jsonl"
    path.write_bytes(b'{"type":"session","version":3,"id":"x","created_at":1}\n')
    with pytest.raises(SessionCorruptError, match="version 3 is not supported"):
        Session.open(path)


def test_a_failed_write_is_cut_back_and_the_log_stays_usable(tmp_path: Path):
    """Fault injection: a file-size limit makes the kernel refuse the write (EFBIG) mid-log."""
    path = tmp_path / "limited.jsonl"
    script = textwrap.dedent(
        f"""
        import resource, signal, dshkit
        from dshkit.session import Session
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        session = Session.create({str(path)!r}, durability="always")
        session.append("user/message", dshkit.create_user_message("small", source={{"kind": "user"}}))
        size = {str(path)!r}
        import os
        limit = os.path.getsize(size) + 300
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        try:
            session.append("user/message", dshkit.create_user_message("x" * 5000, source={{"kind": "user"}}))
        except OSError as error:
            print("refused", error.errno)
        assert len(session.events) == 1
        session.append("user/message", dshkit.create_user_message("after", source={{"kind": "user"}}))
        session.close()
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused")
    with Session.open(path) as session:
        assert [m.text for m in session.messages()] == ["small", "after"]
