"""Models behind one streaming protocol (`dshkit.models.protocol`).

`ScriptedModel` replays scripted responses offline (tests, the demo); `OpenAICompatibleModel`
talks to any OpenAI-compatible HTTP endpoint and is imported only when first used, so importing
`dshkit.models` does not import the HTTP stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
)
from dshkit.models.scripted import ScriptedModel

if TYPE_CHECKING:
    from dshkit.models.openai_compat import OpenAICompatibleModel


def __getattr__(name: str) -> Any:
    if name == "OpenAICompatibleModel":
        from dshkit.models.openai_compat import OpenAICompatibleModel

        return OpenAICompatibleModel
    raise AttributeError(f"module 'dshkit.models' has no attribute {name!r}")


__all__ = [
    "FINISH_REASONS",
    "CancelSignal",
    "Chunk",
    "FinishChunk",
    "FinishReason",
    "Model",
    "ModelError",
    "ModelErrorInfo",
    "OpenAICompatibleModel",
    "ReasoningDelta",
    "ScriptedModel",
    "TextDelta",
    "ToolCallDelta",
    "ToolSpec",
    "UsageChunk",
]
