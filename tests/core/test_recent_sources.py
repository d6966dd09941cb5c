"""A message's `source` read again from the same JSON text is the object already built
(`rust/json/read/recent.rs`): equal values, one object, for `Message.from_json`, a log read from
its text and a log read from its tape alike; anything else reads as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dshkit import FrozenDict, Message
from dshkit.session import Session

USER = {"kind": "user"}
MODEL = {"kind": "model", "provider": "p", "model": "m"}


def message_text(number: int, source: object, text: str = "hi") -> str:
    message = {"id": f"01JAAAAAAAAAAAAAAAAAAAA{number:03d}", "role": "user", "content": [{"type": "text", "text": text}], "source": source}
    return json.dumps(message, separators=(",", ":"))


def test_the_same_source_text_gives_one_object_and_others_their_own() -> None:
    first, second = Message.from_json(message_text(1, USER)), Message.from_json(message_text(2, USER))
    assert first.source is second.source and type(first.source) is FrozenDict and first.source == USER
    model = Message.from_json(message_text(3, MODEL))
    assert model.source == MODEL and model.source is not first.source
    # Equal but written otherwise (spacing, key order): read as a value of its own, still equal.
    spaced = Message.from_json(message_text(4, USER).replace('{"kind":"user"}', '{ "kind" : "user" }'))
    assert spaced.source == USER


def test_sources_in_steady_use_stay_kept_through_a_run_of_one_off_ones() -> None:
    user = Message.from_json(message_text(1, USER)).source
    model = Message.from_json(message_text(2, MODEL)).source
    for number in range(3, 40):
        # A turn: the user, the model, a tool's source naming its own call (never seen again).
        assert Message.from_json(message_text(number, USER)).source is user
        assert Message.from_json(message_text(number + 100, MODEL)).source is model
        tool = Message.from_json(message_text(number + 200, {"kind": "tool", "call_id": f"call_{number}"})).source
        assert tool == {"kind": "tool", "call_id": f"call_{number}"}


def test_a_kept_source_that_breaks_a_rule_is_refused_every_time_with_the_same_error() -> None:
    broken = {"kind": "model", "provider": "p"}  # no model
    errors = []
    for number in range(3):
        with pytest.raises(ValueError) as error:
            Message.from_json(message_text(number, broken))
        errors.append(str(error.value))
    assert len(set(errors)) == 1 and "model" in errors[0]


def test_a_long_source_is_read_each_time() -> None:
    long = {"kind": "model", "provider": "p" * 100, "model": "m"}
    first, second = Message.from_json(message_text(1, long)), Message.from_json(message_text(2, long))
    assert first.source == second.source == long and first.source is not second.source


def test_a_source_text_that_only_starts_like_a_kept_one_reads_as_itself() -> None:
    kept = Message.from_json(message_text(1, USER)).source
    longer = Message.from_json(message_text(2, {"kind": "user", "name": "ada"}))
    assert longer.source == {"kind": "user", "name": "ada"} and longer.source is not kept
    # A kept object's text followed by more of a string is no object of its own: still invalid JSON.
    with pytest.raises(ValueError, match="invalid JSON"):
        Message.from_json(message_text(3, USER)[:-1].replace('{"kind":"user"}', '{"kind":"user"}x'))


@pytest.mark.parametrize("messages", [40, 3000])  # read on one thread; past 1,024 records, taped on a second
def test_a_reopened_log_shares_its_repeated_sources(tmp_path: Path, messages: int) -> None:
    path = tmp_path / "log.jsonl"
    with Session.create(path, durability="none") as session:
        for number in range(messages):
            session.append("user/message", Message.from_json(message_text(number, USER, f"q{number}")))
    with Session.open(path, read_only=True) as reopened:
        history = reopened.messages()
        assert [message.content[0]["text"] for message in history] == [f"q{number}" for number in range(messages)]
        assert all(message.source == USER for message in history)
        assert len({id(message.source) for message in history}) == 1
