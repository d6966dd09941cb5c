"""ScriptedModel: deterministic replay, request recording, delay, bad scripts."""

from __future__ import annotations

import asyncio

import pytest

from dshkit.agent import CancelToken
from dshkit.models import Model, ModelError, ScriptedModel


async def collect(model: ScriptedModel, request: object = "request", cancel: CancelToken | None = None) -> list[dict]:
    return [chunk async for chunk in model.stream(request, cancel or CancelToken())]  # type: ignore[arg-type]


def test_a_str_response_streams_word_by_word_then_stops() -> None:
    model = ScriptedModel(["Hello there, world!"])
    chunks = asyncio.run(collect(model))
    assert [chunk["type"] for chunk in chunks] == ["text_delta"] * 3 + ["finish"]
    assert "".join(chunk["text"] for chunk in chunks[:-1]) == "Hello there, world!"
    assert chunks[-1] == {"type": "finish", "reason": "stop"}


def test_whitespace_is_kept_exactly() -> None:
    text = "  two  spaces\nand a newline \t"
    chunks = asyncio.run(collect(ScriptedModel([text])))
    assert "".join(chunk.get("text", "") for chunk in chunks) == text


def test_chunk_lists_replay_as_given_one_response_per_call() -> None:
    first = [{"type": "reasoning_delta", "text": "hm"}, {"type": "finish", "reason": "stop"}]
    model = ScriptedModel([first, "second"])

    async def main() -> tuple[list[dict], list[dict]]:
        return await collect(model, "r1"), await collect(model, "r2")

    one, two = asyncio.run(main())
    assert one == first
    assert two[0] == {"type": "text_delta", "text": "second"}
    assert model.requests == ("r1", "r2")
    assert model.remaining == 0


def test_replayed_chunks_are_fresh_dicts() -> None:
    script = [{"type": "text_delta", "text": "a"}]
    model = ScriptedModel([script, script])

    async def main() -> None:
        chunks = await collect(model)
        chunks[0]["text"] = "changed"
        again = await collect(model)
        assert again[0]["text"] == "a"

    asyncio.run(main())
    assert script[0]["text"] == "a"


def test_requests_are_recorded_at_call_time_in_order() -> None:
    model = ScriptedModel(["a", "b"])
    model.stream("first", CancelToken())  # type: ignore[arg-type]
    model.stream("second", CancelToken())  # type: ignore[arg-type]
    assert model.requests == ("first", "second")


def test_a_call_beyond_the_script_raises_model_error() -> None:
    model = ScriptedModel([])
    with pytest.raises(ModelError, match="no response scripted for call 0") as info:
        asyncio.run(collect(model))
    assert info.value.code == "script_exhausted"


def test_an_exception_in_the_script_is_raised_at_its_place() -> None:
    model = ScriptedModel([[{"type": "text_delta", "text": "par"}, ConnectionResetError("peer gone")]])
    received: list[dict] = []

    async def main() -> None:
        async for chunk in model.stream("r", CancelToken()):  # type: ignore[arg-type]
            received.append(chunk)

    with pytest.raises(ConnectionResetError, match="peer gone"):
        asyncio.run(main())
    assert received == [{"type": "text_delta", "text": "par"}]


def test_delay_sleeps_between_chunks_and_a_cancelled_signal_stops_the_stream() -> None:
    model = ScriptedModel(["one two three four"], delay=0.001)
    token = CancelToken()

    async def main() -> list[dict]:
        received = []
        async for chunk in model.stream("r", token):  # type: ignore[arg-type]
            received.append(chunk)
            if len(received) == 2:
                token.cancel("test")
        return received

    assert [chunk["text"] for chunk in asyncio.run(main())] == ["one ", "two "]


def test_it_satisfies_the_model_protocol() -> None:
    model = ScriptedModel([], provider="acme", model="m-1")
    assert isinstance(model, Model)
    assert (model.provider, model.model) == ("acme", "m-1")


@pytest.mark.parametrize(
    ("responses", "error", "match"),
    [
        ("just a string", TypeError, "expected a list of responses"),
        ([42], TypeError, r"responses\[0\]: expected a str or a list of chunks, got int"),
        ([{"type": "finish"}], TypeError, r"responses\[0\]: expected a str or a list of chunks, got dict"),
        (["ok", [{"type": "text_delta", "text": "x"}, "oops"]], TypeError, r"responses\[1\]\[1\]: expected a chunk mapping"),
        ([[{"type": "text"}]], ValueError, r"responses\[0\]\[0\]: unknown chunk type 'text'"),
    ],
)
def test_bad_scripts_are_refused_with_their_position(responses: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ScriptedModel(responses)  # type: ignore[arg-type]


@pytest.mark.parametrize("delay", [-1, float("nan"), "0.1", True])
def test_a_bad_delay_is_refused(delay: object) -> None:
    with pytest.raises(ValueError, match="delay"):
        ScriptedModel([], delay=delay)  # type: ignore[arg-type]


def test_bad_names_are_refused() -> None:
    with pytest.raises(TypeError, match="provider"):
        ScriptedModel([], provider="")
    with pytest.raises(TypeError, match="model"):
        ScriptedModel([], model=3)  # type: ignore[arg-type]
