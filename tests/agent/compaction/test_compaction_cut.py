"""The cut (`choose_summary_range`) and pruning's choice: never a tool call apart from its result.

The property test builds random histories (text turns, steps with several calls and their
results, a last step whose calls are still running) in a real session, and checks the cut both by
its own rule and by the session's: `Session.compact` refuses any range that splits a tool pair.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dshkit
from dshkit.agent._compaction.range import choose_summary_range, cut_points, prunable_results
from dshkit.agent._compaction.summary import keep_head_and_tail, pruned_result
from dshkit.agent._compaction.tokens import estimate_message
from dshkit.session import Session


def _assistant(text: str = "", calls: tuple[str, ...] = ()) -> dshkit.Message:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_call", "id": call_id, "name": "run", "arguments": json.dumps({"n": call_id})} for call_id in calls]
    return dshkit.create_assistant_message(blocks, provider="p", model="m")


def build(shape: list[tuple[str, int, int]]) -> Session:
    """A session from a shape: ("user", _, size), ("text", _, size), ("tools", calls, size), ("running", calls, answered)."""
    session = Session()
    number = 0
    for kind, count, size in shape:
        if kind == "user":
            session.append("user/message", dshkit.create_user_message("u" * size, source={"kind": "user"}))
        elif kind == "text":
            session.append("assistant/message", {"message": _assistant("a" * size)})
        else:
            ids = tuple(f"call_{number + index}" for index in range(count))
            number += count
            session.append("assistant/message", {"message": _assistant("", ids)})
            answered = ids if kind == "tools" else ids[:size]
            for call_id in answered:
                result = dshkit.create_tool_result_message(call_id, "r" * (size * 7 % 900), is_error=False)
                session.append("tool/result", {"message": result})
            if kind == "running":
                break  # the running step: nothing follows its unanswered calls
    return session


steps = st.one_of(
    st.tuples(st.just("user"), st.just(0), st.integers(1, 2000)),
    st.tuples(st.just("text"), st.just(0), st.integers(1, 2000)),
    st.tuples(st.just("tools"), st.integers(1, 4), st.integers(1, 600)),
)
shapes = st.tuples(
    st.lists(steps, min_size=1, max_size=30),
    st.one_of(st.none(), st.tuples(st.just("running"), st.integers(1, 3), st.integers(0, 2))),
).map(lambda pair: [("user", 0, 10), *pair[0], *([pair[1]] if pair[1] is not None and pair[1][2] < pair[1][1] else [])])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes, keep=st.integers(0, 4000))
def test_the_cut_never_separates_a_call_from_its_result(shape: list[tuple[str, int, int]], keep: int) -> None:
    session = build(shape)
    messages = session.messages()
    tokens = [estimate_message(message) for message in messages]
    end = choose_summary_range(messages, tokens, keep)
    assert 0 <= end < len(messages)  # the newest message always stays
    inside = messages[:end]
    calls = {str(call["id"]) for message in inside if message.role == "assistant" for call in message.tool_calls}
    results = {str(message.source.get("call_id")) for message in inside if message.source["kind"] == "tool"}
    assert calls == results  # every call in the range has its result there, and no result left its call
    assert not calls & set(session.pending_tool_calls())  # unanswered calls are never touched
    if end:
        assert end in cut_points(messages)
        summary = dshkit.create_user_message("summary", source={"kind": "plugin", "plugin": "compact", "compaction_id": dshkit.new_message_id()})
        session.compact(messages[0].id, messages[end - 1].id, summary)  # the session's own rule agrees
        assert session.messages()[1:] == messages[end:]  # kept messages keep their ids (same objects)


def test_the_cut_falls_inside_a_long_turn_between_steps() -> None:
    shape = [("user", 0, 40)] + [("tools", 2, 300)] * 20
    session = build(shape)
    messages = session.messages()
    tokens = [estimate_message(message) for message in messages]
    end = choose_summary_range(messages, tokens, keep_tokens=sum(tokens) // 4)
    assert 0 < end < len(messages)
    assert messages[end].role == "assistant"  # the kept part starts at a step's call, its results after it
    assert sum(tokens[end:]) <= sum(tokens) // 4


def test_running_calls_stay_outside_and_a_cut_before_them_is_taken() -> None:
    shape = [("user", 0, 40), ("tools", 1, 500), ("tools", 1, 500), ("running", 3, 1)]
    session = build(shape)
    messages = session.messages()
    tokens = [estimate_message(message) for message in messages]
    # keeping nothing would cut after the running step's answered result: that point is refused
    end = choose_summary_range(messages, tokens, keep_tokens=0)
    assert end == 5 and messages[end].tool_calls  # the range stops before the running step's call


def test_nothing_to_cut_and_bad_arguments() -> None:
    session = build([("user", 0, 40)])
    messages = session.messages()
    assert choose_summary_range(messages, [10], 0) == 0
    with pytest.raises(ValueError, match="1 token estimates for 1 messages|token estimates"):
        choose_summary_range(messages, [1, 2], 0)
    with pytest.raises(ValueError, match="keep_tokens must be >= 0"):
        choose_summary_range(messages, [1], -1)


def test_pruning_picks_old_large_results_and_keeps_their_id_head_and_tail() -> None:
    shape = [("user", 0, 40), ("tools", 1, 500), ("tools", 1, 20), ("tools", 1, 500)]
    session = build(shape)
    messages = session.messages()
    tokens = [estimate_message(message) for message in messages]
    positions = prunable_results(messages, tokens, keep_tokens=tokens[-1] + tokens[-2], over_tokens=100)
    assert positions == [2]  # the recent large result and the small one stay
    old = messages[2]
    new = pruned_result(old, 100)
    assert new.id == old.id and new.source == old.source
    text = new.content[0]["content"][0]["text"]
    original = old.content[0]["content"][0]["text"]
    assert text.startswith(original[:50]) and text.endswith(original[-50:]) and "characters pruned" in text
    assert estimate_message(new) < tokens[2]
    session.replace(new)  # a rewrite the session accepts: same id, only the content changed
    assert keep_head_and_tail("short", 100) == "short"


def test_transcript_parts_keep_every_message_in_order_and_a_part_request_names_the_task() -> None:
    from dshkit.agent._compaction.summary import first_user_request, previous_checkpoint, summary_message, summary_request, transcript_parts

    previous = summary_message("Earlier: the user wants a report.", "cmp-1")
    messages = [previous, *(dshkit.create_user_message(f"message {n} " + "x" * 500, source={"kind": "user"}) for n in range(20))]
    parts = transcript_parts(messages, 2000)
    assert len(parts) > 1 and all(len(part) <= 2000 for part in parts)
    joined = "\n\n".join(parts)
    assert [joined.index(f"message {n} ") for n in range(20)] == sorted(joined.index(f"message {n} ") for n in range(20))
    assert "Earlier" not in joined and "omitted" not in joined  # the previous checkpoint goes beside, whole
    assert transcript_parts([dshkit.create_user_message("y" * 5000, source={"kind": "user"})], 1000)[0].count("characters pruned") == 1
    checkpoint = previous_checkpoint(messages)
    request = summary_request(
        checkpoint, parts[1], budget=300, instructions=None, config={}, request=first_user_request(messages), part=(2, len(parts))
    )
    text = request.messages[0].text
    assert "<previous-checkpoint>\nEarlier: the user wants a report.\n</previous-checkpoint>" in text
    assert f"<first-user-request>\nmessage 0 {'x' * 500}\n</first-user-request>" in text
    assert f"part 2 of {len(parts)}" in text
    assert "at most about 300 tokens" in text and "## Next step" in text and "## Errors and fixes" in text
    with pytest.raises(ValueError, match="max_chars"):
        transcript_parts(messages, 0)
