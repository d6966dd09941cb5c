"""What a `ScriptedModel` leaves for the cyclic GC to walk (issue 37), counted, never timed.

A scripted model lives as long as its agent: every tracked object it holds is walked again by
each full collection, a thousand times over with a thousand agents. Its script of chunk lists is
kept frozen (untracked), and `keep_requests=False` keeps no request (a kept request is a
`ModelRequest` and its `History`, two tracked objects per call).
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session

CALLS = 6


def _chunk_script(calls: int) -> list[Any]:
    response = [
        {"type": "tool_call_delta", "index": 0, "id": None, "name": "noop", "arguments": "{}"},
        {"type": "usage", "usage": {"prompt_tokens": 10, "completion_tokens": 2}},
        {"type": "finish", "reason": "tool_calls"},
    ]
    script: list[Any] = [[dict(response[0], id=f"call-{n}"), *response[1:]] for n in range(calls - 1)]
    return [*script, "done"]


def _tracked_reachable(root: object) -> int:
    """Tracked objects reachable from `root` through tracked objects (what the GC can walk from it)."""
    seen = {id(root)}
    stack = [root]
    while stack:
        for referent in gc.get_referents(stack.pop()):
            if gc.is_tracked(referent) and id(referent) not in seen and not isinstance(referent, type):
                seen.add(id(referent))
                stack.append(referent)
    return len(seen)


async def _noop(arguments: Any, ctx: Any) -> str:
    return "ok"


def _run_turn(model: ScriptedModel) -> Agent:
    agent = Agent(model, session=Session(), tools=[Tool("noop", "n", {"type": "object"}, _noop)])

    async def main() -> None:
        agent.followup(_user("go"))
        await agent.when_idle()

    asyncio.run(main())
    assert agent.session.events[-1].data["reason"] == {"kind": "completed"}
    return agent


def _user(text: str) -> Any:
    import dshkit

    return dshkit.create_user_message(text, source={"kind": "user"})


def test_a_script_of_chunk_lists_holds_no_tracked_object_per_response() -> None:
    small, large = ScriptedModel(_chunk_script(2)), ScriptedModel(_chunk_script(40))
    # The same few objects (the model, its script list, its request list) whatever the length:
    # before, each response was a tracked list holding a tracked dict (its usage chunk): 76 more here.
    assert _tracked_reachable(large) == _tracked_reachable(small)


def test_frozen_script_chunks_stream_as_fresh_plain_dicts() -> None:
    response = _chunk_script(2)[0]
    model = ScriptedModel([response, response])
    first = asyncio.run(_stream_first(model))
    assert first == response
    assert all(type(chunk) is dict for chunk in first) and type(first[1]["usage"]) is dict
    first[1]["usage"]["prompt_tokens"] = 0  # editing what was streamed edits neither the script...
    response[1]["usage"]["completion_tokens"] = 0  # ...nor does editing what was given
    assert asyncio.run(_stream_first(model)) == _chunk_script(2)[0]


async def _stream_first(model: ScriptedModel) -> list[Any]:
    return [chunk async for chunk in model.stream("request")]  # type: ignore[arg-type]


def test_a_chunk_that_is_not_json_is_kept_and_replayed_as_given() -> None:
    marker = object()
    model = ScriptedModel([[{"type": "text_delta", "text": "hi", "extra": marker}, {"type": "finish", "reason": "stop"}]])
    streamed = asyncio.run(_stream_first(model))
    assert streamed[0]["extra"] is marker


def test_a_model_keeping_no_requests_holds_nothing_more_after_its_calls() -> None:
    model = ScriptedModel(_chunk_script(CALLS), keep_requests=False)
    before = _tracked_reachable(model)
    _run_turn(model)
    assert model.remaining == 0
    assert _tracked_reachable(model) == before


def test_a_model_keeping_requests_holds_each_one() -> None:
    model = ScriptedModel(_chunk_script(CALLS))
    before = _tracked_reachable(model)
    _run_turn(model)
    assert len(model.requests) == CALLS
    # each call's request and its History at least (the session's message list they share, once)
    assert _tracked_reachable(model) >= before + 2 * CALLS


def test_requests_of_a_model_keeping_none_is_an_error_naming_why() -> None:
    model = ScriptedModel(["one", "two"], keep_requests=False)
    asyncio.run(_stream_first(model))
    assert model.remaining == 1
    with pytest.raises(RuntimeError, match=r"ScriptedModel\(keep_requests=False\) keeps no requests: it has received 1"):
        model.requests


@pytest.mark.parametrize("bad", [0, 1, "no", None])
def test_keep_requests_must_be_a_bool(bad: Any) -> None:
    with pytest.raises(TypeError, match=f"ScriptedModel keep_requests: expected a bool, got {type(bad).__name__}"):
        ScriptedModel(["x"], keep_requests=bad)
