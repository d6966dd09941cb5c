"""A failed fsync poisons the store: fault injection through `os.fsync` (and `os.ftruncate`)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from dshkit.session import Session, SessionError, SessionRecoveryWarning


def fail_with(code: int):
    def failing(*args: object) -> None:
        raise OSError(code, os.strerror(code))

    return failing


def test_after_a_failed_fsync_every_append_raises_until_the_log_is_reopened(tmp_path: Path, build, monkeypatch):
    path = tmp_path / "log.jsonl"
    session = Session.create(path, durability="always")
    session.append("user/message", build.user("kept"))
    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", fail_with(errno.EIO))
        with pytest.raises(OSError, match="Input/output error"):
            session.append("user/message", build.user("failed"))
    for _ in range(2):  # fsync works again, but the store cannot know what the kernel dropped
        with pytest.raises(SessionError, match="no further appends: fsync failed"):
            session.append("user/message", build.user("later"))
    assert [m.text for m in session.messages()] == ["kept"]
    session.close()
    with Session.open(path, durability="always") as reopened:
        assert [m.text for m in reopened.messages()] == ["kept"]
        reopened.append("user/message", build.user("after reopening"))
    with Session.open(path) as again:
        assert [m.text for m in again.messages()] == ["kept", "after reopening"]


def test_an_event_whose_fsync_and_cut_back_failed_does_not_reappear(tmp_path: Path, build, monkeypatch):
    path = tmp_path / "log.jsonl"
    session = Session.create(path, durability="always")
    session.append("user/message", build.user("kept"))
    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", fail_with(errno.EIO))
        patch.setattr(os, "ftruncate", fail_with(errno.EIO))
        with pytest.raises(OSError):
            session.append("user/message", build.user("failed"))
        with pytest.raises(SessionError, match="could not be cut back"):
            session.append("user/message", build.user("later"))
    session.close()
    assert b"failed" in path.read_bytes()  # the line is still there, voided in place
    with pytest.warns(SessionRecoveryWarning, match="line 3: torn last line .void: its write failed"):
        reader = Session.open(path, read_only=True)
    with reader:
        assert [m.text for m in reader.messages()] == ["kept"]
    with pytest.warns(SessionRecoveryWarning, match="line 3: torn last line .void"):
        writer = Session.open(path)
    with writer:
        assert [m.text for m in writer.messages()] == ["kept"]
        writer.append("user/message", build.user("next"))
    with Session.open(path) as again:  # the void line was cut: no warning now
        assert [m.text for m in again.messages()] == ["kept", "next"]


def test_a_failed_fsync_at_a_sqlite_checkpoint_poisons_the_store(tmp_path: Path, build, monkeypatch):
    path = tmp_path / "log.sqlite"
    session = Session.create(path, durability="checkpoint")
    session.append("user/message", build.user("kept"))
    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", fail_with(errno.EIO))
        with pytest.raises(OSError):
            session.sync()
    with pytest.raises(SessionError, match="no further appends: fsync failed"):
        session.append("user/message", build.user("later"))
    session.close()
    with Session.open(path) as reopened:
        assert [m.text for m in reopened.messages()] == ["kept"]
