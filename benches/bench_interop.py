"""Interop converters: 10,000 messages to and from each format, beside building the same list
directly with the SDK's own types (the cost a user pays anyway to hand that SDK a history).

One group per format; rows `to_<format>` (dshkit -> format), `from_<format>` (format -> dshkit)
and `sdk_native` (the same foreign list built straight from plain data). Rows whose SDK is not
installed are skipped.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from typing import Any

import pytest

import dshkit
from dshkit.interop import anthropic, openai_chat, openai_responses

COUNT = 10_000
TARGETS: list[dict[str, Any]] = []  # no contract target: the table shows the ratios


def _history() -> list[dshkit.Message]:
    messages: list[dshkit.Message] = []
    turn = 0
    while len(messages) < COUNT:
        turn += 1
        call_id = f"call_{turn}"
        messages.append(dshkit.create_user_message(f"question {turn}", source={"kind": "user"}))
        messages.append(dshkit.create_assistant_message(
            [{"type": "text", "text": f"let me look {turn}"},
             {"type": "tool_call", "id": call_id, "name": "lookup", "arguments": json.dumps({"q": turn})}],
            provider="p", model="m",
        ))
        messages.append(dshkit.create_tool_result_message(call_id, f"result {turn}"))
        messages.append(dshkit.create_assistant_message(f"answer {turn}", provider="p", model="m"))
    return messages[:COUNT]


HISTORY = _history()
TURNS = [(f"question {t}", f"let me look {t}", f"call_{t}", {"q": t}, f"result {t}", f"answer {t}") for t in range(1, COUNT // 4 + 1)]


def _chat_native() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for question, look, call_id, args, result, answer in TURNS:
        out.append({"role": "user", "content": question})
        out.append({"role": "assistant", "content": look, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": json.dumps(args)}}]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": result})
        out.append({"role": "assistant", "content": answer})
    return out


def _anthropic_native() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for question, look, call_id, args, result, answer in TURNS:
        out.append({"role": "user", "content": [{"type": "text", "text": question}]})
        out.append({"role": "assistant", "content": [{"type": "text", "text": look},
                                                      {"type": "tool_use", "id": call_id, "name": "lookup", "input": dict(args)}]})
        out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": [{"type": "text", "text": result}]}]})
        out.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
    return out


def _responses_native() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for question, look, call_id, args, result, answer in TURNS:
        out.append({"type": "message", "role": "user", "content": question})
        out.append({"type": "message", "role": "assistant", "content": look})
        out.append({"type": "function_call", "call_id": call_id, "name": "lookup", "arguments": json.dumps(args)})
        out.append({"type": "function_call_output", "call_id": call_id, "output": result})
        out.append({"type": "message", "role": "assistant", "content": answer})
    return out


def _langchain_native() -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for question, look, call_id, args, result, answer in TURNS:
        out.append(HumanMessage(content=question, id=dshkit.new_message_id()))
        out.append(AIMessage(content=look, id=dshkit.new_message_id(),
                             tool_calls=[{"id": call_id, "name": "lookup", "args": dict(args), "type": "tool_call"}]))
        out.append(ToolMessage(content=result, tool_call_id=call_id, id=dshkit.new_message_id()))
        out.append(AIMessage(content=answer, id=dshkit.new_message_id()))
    return out


def _pydantic_ai_native() -> list[Any]:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

    out: list[Any] = []
    for question, look, call_id, args, result, answer in TURNS:
        out.append(ModelRequest(parts=[UserPromptPart(content=question)]))
        out.append(ModelResponse(parts=[TextPart(content=look), ToolCallPart(tool_name="lookup", args=json.dumps(args), tool_call_id=call_id)]))
        out.append(ModelRequest(parts=[ToolReturnPart(tool_name="lookup", content=result, tool_call_id=call_id)]))
        out.append(ModelResponse(parts=[TextPart(content=answer)]))
    return out


def _lazy(module: str, name: str) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        return getattr(importlib.import_module(f"dshkit.interop.{module}"), name)(*args)
    return call


def _import_anthropic(params: tuple[Any, list[Any]]) -> Any:
    return anthropic.from_anthropic(params[1], system=params[0])


# format -> (sdk module needed or None, to, from, native builder)
FORMATS: dict[str, tuple[str | None, Callable[..., Any], Callable[..., Any], Callable[[], Any]]] = {
    "openai_chat": ("openai", openai_chat.to_chat_messages, openai_chat.from_chat_messages, _chat_native),
    "openai_responses": ("openai", openai_responses.to_response_items, openai_responses.from_response_items, _responses_native),
    "anthropic": ("anthropic", anthropic.to_anthropic, _import_anthropic, _anthropic_native),
    "langchain": ("langchain_core", _lazy("langchain", "to_langchain"), _lazy("langchain", "from_langchain"), _langchain_native),
    "pydantic_ai": ("pydantic_ai", _lazy("pydantic_ai", "to_pydantic_ai"), _lazy("pydantic_ai", "from_pydantic_ai"), _pydantic_ai_native),
}


def _needs(sdk: str | None) -> None:
    if sdk is not None and importlib.util.find_spec(sdk) is None:
        pytest.skip(f"{sdk} is not installed")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_to_format(benchmark: Any, fmt: str) -> None:
    sdk, to, _, _ = FORMATS[fmt]
    _needs(sdk)
    benchmark.group = f"interop-{fmt}"
    converted = to(HISTORY)
    assert len(converted[1] if fmt == "anthropic" else converted) >= COUNT
    benchmark.pedantic(to, args=(HISTORY,), rounds=3, iterations=1)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_from_format(benchmark: Any, fmt: str) -> None:
    sdk, to, back, _ = FORMATS[fmt]
    _needs(sdk)
    benchmark.group = f"interop-{fmt}"
    foreign = to(HISTORY)
    assert len(back(foreign)) == COUNT
    benchmark.pedantic(back, args=(foreign,), rounds=3, iterations=1)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_sdk_native(benchmark: Any, fmt: str) -> None:
    sdk, _, _, native = FORMATS[fmt]
    _needs(sdk)
    benchmark.group = f"interop-{fmt}"
    assert len(native()) >= COUNT
    benchmark.pedantic(native, rounds=3, iterations=1)
