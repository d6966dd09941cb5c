"""JSON Lines durability: when the file is fsynced, and what a failed fsync stops."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dshkit.session import Session, SessionError


def test_jsonl_always_fsyncs_every_append_and_checkpoint_only_at_sync(build, tmp_path: Path, monkeypatch):
    calls: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    with Session.create(tmp_path / "always.jsonl", durability="always") as session:
        calls.clear()
        for _ in range(5):
            session.append("user/message", build.user())
        assert len(calls) == 5
    with Session.create(tmp_path / "checkpoint.jsonl", durability="checkpoint") as session:
        calls.clear()
        for _ in range(5):
            session.append("user/message", build.user())
        assert calls == []
        session.sync()
        assert len(calls) == 1
        session.sync()  # nothing new: no second fsync
        assert len(calls) == 1
    with Session.create(tmp_path / "none.jsonl", durability="none") as session:
        calls.clear()
        session.append("user/message", build.user())
        session.sync()
    assert calls == []


def test_a_failed_fsync_stops_further_appends(build, tmp_path: Path, monkeypatch):
    """Fault injection: after an fsync error the kernel may have dropped the data; trust nothing."""
    session = Session.create(tmp_path / "log.jsonl", durability="checkpoint")
    session.append("user/message", build.user())

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        session.sync()
    monkeypatch.undo()
    with pytest.raises(SessionError, match="fsync failed"):
        session.append("user/message", build.user())
    assert len(session.events) == 1
    session.store.close()
