"""Property tests: whatever is appended comes back equal after a re-open, in both stores."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dshkit
from dshkit.session import Session, derive_messages

json_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)

# One operation on a session: ("user", text) | ("tools", n_calls) | ("replace", index) | ("compact", index) | ("note", json)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.text(max_size=30)),
        st.tuples(st.just("tools"), st.integers(0, 3)),
        st.tuples(st.just("replace"), st.integers(0, 50)),
        st.tuples(st.just("compact"), st.integers(0, 50)),
        st.tuples(st.just("note"), json_values),
    ),
    max_size=25,
)


def apply(session: Session, operation: tuple[str, Any], counter: list[int]) -> None:
    kind, value = operation
    counter[0] += 1
    if kind == "user":
        session.append("user/message", dshkit.create_user_message(value, source={"kind": "user"}))
    elif kind == "tools":
        calls = [f"call-{index}" for index in range(value)]  # ids repeat across steps on purpose
        content = [{"type": "text", "text": f"step {counter[0]}"}]
        content += [{"type": "tool_call", "id": call, "name": "t", "arguments": "{}"} for call in calls]
        reply = dshkit.create_assistant_message(content, provider="p", model="m")
        session.append("assistant/message", {"turn": 1, "step": counter[0], "message": reply})
        for call in calls:
            result = dshkit.create_tool_result_message(call, f"result {counter[0]}")
            session.append("tool/result", {"turn": 1, "step": counter[0], "message": result})
    elif kind == "replace":
        history = session.messages()
        if history:
            target = history[value % len(history)]
            if target.source["kind"] == "tool":
                block = target.content[0]
                session.replace(target.with_content([{**block, "content": [{"type": "text", "text": "[pruned]"}]}]))
            else:
                session.replace(target.with_content(target.content + ({"type": "text", "text": " (edited)"},)))
    elif kind == "compact":
        history = session.messages()
        if history:
            start = value % len(history)
            for end in range(start, len(history)):
                try:
                    session.compact(history[start].id, history[end].id, dshkit.create_user_message("summary", source={"kind": "plugin", "plugin": "compact", "compaction_id": dshkit.new_message_id()}))
                    return
                except ValueError:
                    continue  # that range would split a tool call from its result
    else:
        session.append("plugin/note", {"ignorable": True, "value": value})


@pytest.mark.parametrize("suffix", [".jsonl", ".sqlite"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_a_random_session_reopens_equal(suffix: str, ops: list[tuple[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"log{suffix}"
        counter = [0]
        with Session.create(path, durability="none") as session:
            for operation in ops:
                apply(session, operation, counter)
            events = list(session.events)
            messages = session.messages()
        assert derive_messages(events) == messages  # the incremental fold equals a fresh fold
        with Session.open(path, durability="none") as reopened:
            assert list(reopened.events) == events
            assert reopened.messages() == messages
            assert [m.id for m in reopened.messages()] == [m.id for m in messages]
