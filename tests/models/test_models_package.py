"""`dshkit.models`: the protocol types and ScriptedModel at once, the HTTP model only on use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dshkit.models


def test_the_protocol_types_and_scripted_model_are_exported() -> None:
    for name in ("ScriptedModel", "Model", "ModelError", "CancelSignal", "Chunk", "TextDelta", "ReasoningDelta",
                 "ToolCallDelta", "UsageChunk", "FinishChunk", "ToolSpec", "FINISH_REASONS"):
        assert hasattr(dshkit.models, name), name
    assert set(dshkit.models.FINISH_REASONS) == {"stop", "tool_calls", "max_tokens", "error"}


def test_the_http_model_is_imported_lazily() -> None:
    code = (
        "import sys, dshkit.models, dshkit.agent\n"
        "assert 'dshkit.models.chat.model' not in sys.modules, 'imported eagerly'\n"
        "assert 'httpx' not in sys.modules, 'httpx imported eagerly'\n"
        "cls = dshkit.models.OpenAICompatibleModel\n"
        "assert cls.__module__ == 'dshkit.models.chat.model', cls.__module__\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        dshkit.models.Nope  # noqa: B018


def test_model_error_info() -> None:
    error = dshkit.models.ModelError("slow down", code="http_429", status=429, request_id="req-1", retryable=True)
    assert error.to_info() == {"code": "http_429", "message": "slow down", "status": 429, "request_id": "req-1", "retryable": True}
    assert dshkit.models.ModelError("x").to_info() == {"code": "model_error", "message": "x"}
