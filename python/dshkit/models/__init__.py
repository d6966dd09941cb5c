"""Models behind one streaming protocol (`dshkit.models.protocol`).

`ScriptedModel` replays scripted responses offline (tests, the demo), in plain replies (`call`,
`output`, text, exceptions) or chunks; `FunctionModel(fn)` answers with `fn(request)`; `TestModel`
calls every tool once and answers with schema-valid output. The HTTP models
(`OpenAICompatibleModel` for Chat Completions, `AnthropicModel` for the Messages API,
`OpenAIResponsesModel` for the Responses API) are imported only when first used, so importing
`dshkit.models` does not import the HTTP stack; they connect through a `Provider` and take
call settings in one vocabulary (`ModelSettings`). `from_env` builds the model the environment
names, `infer_model` the one a name like ``"openai:gpt-4.1-mini"`` names; `FallbackModel` tries
several in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dshkit.models.fallback import FallbackModel
from dshkit.models.protocol import (
    FINISH_REASONS,
    CancelSignal,
    Chunk,
    FinishChunk,
    FinishReason,
    Model,
    ModelError,
    ModelErrorInfo,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    UsageChunk,
    supports_native_output,
)
from dshkit.models.function import FunctionModel
from dshkit.models.provider import Provider
from dshkit.models.replies import call, output
from dshkit.models.scripted import ScriptedModel
from dshkit.models.selection import from_env, infer_model
from dshkit.models.settings import ModelSettings
from dshkit.models.test import TestModel

if TYPE_CHECKING:
    from dshkit.models.anthropic.model import AnthropicModel
    from dshkit.models.chat.model import OpenAICompatibleModel
    from dshkit.models.responses.model import OpenAIResponsesModel

_LAZY = {
    "AnthropicModel": "dshkit.models.anthropic.model",
    "OpenAICompatibleModel": "dshkit.models.chat.model",
    "OpenAIResponsesModel": "dshkit.models.responses.model",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'dshkit.models' has no attribute {name!r}")


__all__ = [
    "AnthropicModel",
    "CancelSignal",
    "Chunk",
    "FINISH_REASONS",
    "FallbackModel",
    "FinishChunk",
    "FinishReason",
    "FunctionModel",
    "Model",
    "ModelError",
    "ModelErrorInfo",
    "ModelSettings",
    "OpenAICompatibleModel",
    "OpenAIResponsesModel",
    "Provider",
    "ReasoningDelta",
    "ScriptedModel",
    "TestModel",
    "TextDelta",
    "ToolCallDelta",
    "ToolSpec",
    "UsageChunk",
    "call",
    "from_env",
    "infer_model",
    "output",
    "supports_native_output",
]
