"""Fault injection: SIGKILL a real child that appends with durability="always", many times."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from dshkit.session import Session, SessionRecoveryWarning

CHILD = textwrap.dedent(
    """
    import sys, dshkit
    from dshkit.session import Session
    path = sys.argv[1]
    try:
        session = Session.open(path, durability="always")
    except FileNotFoundError:
        session = Session.create(path, durability="always")
    n = len(session.events)
    print("ready", flush=True)
    while True:
        text = f"append {n}"
        event = session.append("user/message", dshkit.create_user_message(text, source={"kind": "user"}))
        print(event.seq, text, flush=True)
        n += 1
    """
)

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


def test_a_killed_writer_loses_nothing_it_reported_done(log_path: Path):
    rng = random.Random(20251130)
    reported: dict[int, str] = {}
    for _ in range(5):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(log_path)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.02, 0.2))
        child.send_signal(signal.SIGKILL)
        for line in child.stdout:  # what the child acknowledged before it died
            if not line.endswith("\n"):
                continue  # the kill cut this line short: it is no acknowledgement
            seq, text = line.rstrip("\n").split(" ", 1)
            if text.startswith("append "):
                reported[int(seq)] = text
        child.stdout.close()
        child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SessionRecoveryWarning)  # a torn last line is allowed
            session = Session.open(log_path)
        with session:
            texts = {event.seq: event.message.text for event in session.events}
            assert list(texts) == list(range(len(texts)))
            for seq, text in reported.items():
                assert texts.get(seq) == text
    assert len(reported) > 5  # the children did make progress
