"""The plain event types' rules are one table, `events.PLAIN_EVENT_RULES`: the Python checks are
built from it and the native passes (`vouch_plain_append` on append, the record scan on open) read
it through `_core.set_plain_rules`, so a rule changed there changes all three. Each case runs in a
fresh interpreter: the native table is set once per process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from support import DSHKIT_PATH

from dshkit.session.events import KNOWN_EVENT_TYPES, MESSAGE_EVENT_TYPES, PLAIN_DATA_CHECKS, PLAIN_EVENT_RULES



def run_fresh(code: str) -> str:
    """Run `code` in a new interpreter with this checkout's dshkit; its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": DSHKIT_PATH},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_checks_and_the_known_types_come_from_the_table() -> None:
    assert set(PLAIN_DATA_CHECKS) == set(PLAIN_EVENT_RULES)
    assert KNOWN_EVENT_TYPES == MESSAGE_EVENT_TYPES | set(PLAIN_EVENT_RULES)
    with pytest.raises(ValueError, match=r"turn/start data needs 'turn' \(an int\)"):
        PLAIN_DATA_CHECKS["turn/start"]("turn/start", {})  # type: ignore[arg-type]


def test_the_native_append_proof_reads_the_table_it_is_given() -> None:
    out = run_fresh(
        """
        from dshkit._core import set_plain_rules, vouch_plain_append
        print(vouch_plain_append("turn/start", {"turn": 1}))  # no table yet: the Python path decides
        set_plain_rules({"turn/start": (("turn", "step"), ("name",), False)})
        print(vouch_plain_append("turn/start", {"turn": 1}))
        print(vouch_plain_append("turn/start", {"turn": 1, "step": 2, "name": "n"}))
        print(vouch_plain_append("step/start", {"turn": 1, "step": 2}))  # not in this table
        """
    )
    assert out.splitlines() == ["None", "None", "FrozenDict({'turn': 1, 'step': 2, 'name': 'n'})", "None"]


def test_the_native_open_scan_reads_the_table_it_is_given() -> None:
    out = run_fresh(
        """
        from collections import namedtuple
        from dshkit._core import decode_records, set_plain_rules

        Event = namedtuple("Event", "type seq time data surface_op source_event_seqs")
        records = [
            '{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}}',
            '{"seq":1,"time":1,"type":"turn/start","data":{"turn":1,"step":2}}',
        ]
        print(decode_records(records, Event)[5])  # no table yet: both left to Python
        set_plain_rules({"turn/start": (("turn", "step"), (), False)})
        print(decode_records(records, Event)[5])  # the record without `step` is left to Python
        """
    )
    assert out.splitlines() == ["[0, 1]", "[0]"]


def test_a_second_different_table_and_bad_tables_are_refused() -> None:
    out = run_fresh(
        """
        from dshkit._core import set_plain_rules
        for bad in [
            {"turn/start": (("turn",), (), 1)},
            {"turn/start": (("turn",), ("title",), False)},
            {"turn/start": (["turn"], (), False)},
            {"turn/start": ("turn",)},
            {3: ((), (), False)},
        ]:
            try:
                set_plain_rules(bad)
            except (TypeError, ValueError) as error:
                print(type(error).__name__, error)
        set_plain_rules({"turn/start": (("turn",), (), False)})
        set_plain_rules({"turn/start": (("turn",), (), False)})  # the same again: fine
        try:
            import dshkit.session  # events.py gives the library's table, not this one
        except ValueError as error:
            print("ValueError", error)
        """
    )
    lines = out.splitlines()
    assert lines[0] == "TypeError plain rule of \"turn/start\": reason_with_kind must be a bool"
    assert lines[1].startswith("ValueError plain rule of \"turn/start\": the native passes read no field \"title\"")
    assert lines[2] == "TypeError plain rule of \"turn/start\": int fields must be a tuple of field names"
    assert lines[3] == "TypeError plain rule of \"turn/start\" must be (int fields, str fields, reason_with_kind)"
    assert lines[4] == "TypeError plain rules: each event type must be a str"
    assert lines[5].startswith("ValueError the plain rules are set already, to another table")
    assert len(lines) == 6


def test_the_library_gives_every_rule_python_alone_does_not_check() -> None:
    out = run_fresh(
        """
        import dshkit.session.events as events
        from dshkit._core import set_plain_rules
        native = {t: (r.ints, r.strs, r.reason_with_kind) for t, r in events.PLAIN_EVENT_RULES.items() if r.other is None}
        set_plain_rules(native)  # the same table again: accepted, so it is the one installed
        print(sorted(native))
        """
    )
    expected = sorted(t for t, rule in PLAIN_EVENT_RULES.items() if rule.other is None)
    assert out.strip() == repr(expected)
    assert "request/header" not in expected and "turn/start" in expected
