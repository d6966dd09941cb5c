"""Which failures of a served request the worker tries again (`dshkit.serve.worker.is_transient`)."""

from __future__ import annotations

import pytest

pytest.importorskip("dbos")

from dshkit.serve.worker import is_transient  # noqa: E402
from dshkit.session import SessionConflictError, SessionCorruptError, SessionError  # noqa: E402


@pytest.mark.parametrize("error", [
    ConnectionError("refused"), ConnectionResetError("reset"), TimeoutError("slow"),
    SessionError("cannot connect to postgresql://db/x: server closed the connection"),
])
def test_a_lost_connection_is_tried_again(error: Exception) -> None:
    assert is_transient(error)


@pytest.mark.parametrize("error", [
    SessionCorruptError("log.sqlite: row 3 of dshkit_events: checksum mismatch"),
    SessionConflictError("another writer holds the session"),
    TypeError("agent factory: expected an Agent, got NoneType"), KeyError("agent"), ValueError("unknown action kind"),
])
def test_a_failure_that_would_fail_again_is_not(error: Exception) -> None:
    assert not is_transient(error)
