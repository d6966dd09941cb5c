"""Request projection: a frozen, pure function of the log prefix (items 13 and 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

import dshkit
from dshkit import FrozenDict
from dshkit.session import ModelRequest, Session, project_request

TOOLS = [{"name": "lookup", "description": "find things", "parameters": {"type": "object", "properties": {}}}]


def header(system: str = "be brief", reason: str = "initial", temperature: float = 0.2) -> dict:
    return {"header": {"system": system, "tools": TOOLS, "config": {"temperature": temperature}}, "reason": reason}


def test_request_holds_the_derived_messages_and_the_latest_header(build):
    session = Session()
    prompt = build.user()
    session.append("user/message", prompt)
    first = session.append("request/header", header())
    request = project_request(session)
    assert request.messages == session.messages() and request.messages[0] is prompt
    assert request.system == "be brief"
    assert request.tools == tuple(dshkit.freeze(TOOLS))
    assert request.config == {"temperature": 0.2}
    assert request.header_seq == first.seq
    second = session.append("request/header", header("be verbose", "change"))
    assert project_request(session).system == "be verbose"
    assert project_request(session).header_seq == second.seq
    assert session.request_header is second


def test_requests_under_one_header_check_it_each_time_until_it_passed(build):
    """A header's fields are checked once and then reused (per step of an agent): a header that
    fails the check fails every projection, and one header's fields never leak into another's."""
    session = Session()
    session.append("user/message", build.user())
    session.append("request/header", {"header": {"system": "s", "tools": ["not a mapping"]}, "reason": "initial"})
    for _ in range(2):
        with pytest.raises(TypeError, match=r"tools\[0\] must be a mapping"):
            project_request(session)
    good = session.append("request/header", header("one", "change"))
    first, again = project_request(session), project_request(session)
    assert first == again and again.header_seq == good.seq and again.tools == tuple(dshkit.freeze(TOOLS))
    assert project_request(session, system="override").system == "override"  # an override is no reuse
    other = Session()
    other.append("user/message", build.user())
    other.append("request/header", header("two", "initial", temperature=0.5))
    assert (project_request(other).system, project_request(other).config) == ("two", {"temperature": 0.5})
    assert (project_request(session).system, project_request(session).config) == ("one", {"temperature": 0.2})


def test_without_a_header_the_arguments_fill_the_request(build):
    session = Session()
    session.append("user/message", build.user())
    bare = project_request(session)
    assert (bare.system, bare.tools, bare.config, bare.header_seq) == (None, (), {}, None)
    given = project_request(session, system="sys", tools=TOOLS, config={"max_tokens": 10})
    assert given.system == "sys" and given.tools[0]["name"] == "lookup" and given.config == {"max_tokens": 10}
    session.append("request/header", header())
    assert project_request(session, system="override").system == "override"


def test_model_request_is_immutable_all_the_way_down(build):
    session = Session()
    session.append("user/message", build.user())
    session.append("request/header", header())
    request = project_request(session)
    with pytest.raises(AttributeError):
        request.system = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del request.messages
    assert isinstance(request.messages, tuple) and isinstance(request.tools, tuple)
    assert isinstance(request.config, FrozenDict) and isinstance(request.tools[0], FrozenDict)
    with pytest.raises(TypeError):
        request.tools[0]["parameters"]["type"] = "array"  # type: ignore[index]
    assert request == project_request(session) and hash(request) == hash(project_request(session))
    plain = request.to_dict()
    plain["tools"][0]["name"] = "changed"
    assert request.tools[0]["name"] == "lookup"


def test_model_request_rejects_what_is_not_a_message_or_frozen_json(build):
    with pytest.raises(TypeError, match=r"messages\[0\]"):
        ModelRequest([{"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="tools"):
        ModelRequest([], tools={"name": "x"})  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ModelRequest([], config={"temperature": float("nan")})


def test_every_request_can_be_rebuilt_from_the_log(build, log_path: Path):
    sent: list[tuple[int, ModelRequest]] = []
    with Session.create(log_path) as session:
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("user/message", build.user("question"))
        session.append("request/header", header())
        sent.append((len(session.events) - 1, project_request(session)))
        session.append("assistant/message", {"turn": 1, "step": 1, "message": build.assistant("calling", ["c1"])})
        session.append("tool/result", {"turn": 1, "step": 1, "message": build.result("c1")})
        session.append("step/end", {"turn": 1, "step": 1})
        session.append("step/start", {"turn": 1, "step": 2})
        session.append("user/message", build.context("steering"))  # joins at the step boundary
        session.append("request/header", header(temperature=0.7, reason="change"))
        sent.append((len(session.events) - 1, project_request(session)))
        session.append("assistant/message", {"turn": 1, "step": 2, "message": build.assistant("done")})
        session.append("step/end", {"turn": 1, "step": 2})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    with Session.open(log_path) as reopened:
        for seq, request in sent:
            rebuilt = project_request(reopened, at_seq=seq)
            assert rebuilt == request
            assert [m.id for m in rebuilt.messages] == [m.id for m in request.messages]
        assert project_request(reopened, at_seq=sent[0][0]).config == {"temperature": 0.2}
        with pytest.raises(ValueError, match="at_seq"):
            project_request(reopened, at_seq=len(reopened.events))


def test_request_at_a_prefix_honours_later_replacements_only_after_them(build):
    session = Session()
    prompt = build.user("draft")
    session.append("user/message", prompt)
    before = project_request(session, at_seq=0)
    session.replace(prompt.with_content("final"))
    assert project_request(session, at_seq=0) == before
    assert project_request(session).messages[0].text == "final"
