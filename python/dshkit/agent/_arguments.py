"""The `Agent` constructor's arguments: checked, with a clear error naming the bad one, and put in
the shapes the engine takes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dshkit.agent.compaction import Compaction
from dshkit.agent.hooks import Hook
from dshkit.models.protocol import Model
from dshkit.models.selection import infer_model
from dshkit.session import Session


def checked_model(model: Model | str) -> Model:
    """`model` as a `Model`: a name (``"openai:gpt-4.1-mini"``) is inferred, anything else must look like one."""
    if isinstance(model, str):  # "openai:gpt-4.1-mini": a known provider's model, its key from the environment
        model = infer_model(model)
    if not (
        callable(getattr(model, "stream", None))
        and isinstance(getattr(model, "provider", None), str)
        and isinstance(getattr(model, "model", None), str)
    ):
        raise TypeError(
            f"Agent model: expected a model with str 'provider' and 'model' and a stream(request, cancel) method, "
            f"got {type(model).__name__}"
        )
    return model


def checked_arguments(model: Model | str, system: Any, config: Any, session: Any, compaction: Any) -> Model:
    """`Agent`'s `model` as a `Model` (`checked_model`); `TypeError` naming the first of its `system`,
    `config`, `session`, `compaction` of a wrong type."""
    checked = checked_model(model)
    if system is not None and not isinstance(system, str):
        raise TypeError(f"Agent system: expected a str or None, got {type(system).__name__}")
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"Agent config: expected a mapping of call settings, got {type(config).__name__}")
    if session is not None and not isinstance(session, Session):
        raise TypeError(f"Agent session: expected a dshkit.session.Session, got {type(session).__name__}")
    if compaction is not None and not isinstance(compaction, Compaction):
        raise TypeError(f"Agent compaction: expected a dshkit.agent.Compaction, got {type(compaction).__name__}")
    return checked


def listed_hooks(hook: Any) -> tuple[Hook, ...]:
    """A tool hook entry (one callable, or a tuple of them) as a tuple."""
    if hook is None:
        return ()
    return hook if isinstance(hook, tuple) else (hook,)


__all__ = ["checked_arguments", "checked_model", "listed_hooks"]
