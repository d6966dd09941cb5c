"""`ModelSettings`: call settings in one vocabulary, which each API maps to its own names.

An agent's call settings (``Agent(config=...)``, a model's own ``settings=`` defaults, the
compaction summarizer's token cap) are written once, in the common names below, and each HTTP
model translates them when it builds its body: ``max_tokens`` is ``max_tokens`` for Chat
Completions and the Messages API, ``max_output_tokens`` for the Responses API; ``stop`` is
Anthropic's ``stop_sequences``. A common setting an API has no equivalent for is refused with a
`ValueError` naming it, before anything is sent. Any other key is the provider's own and passes
through unchanged (``reasoning``, ``thinking``, ``reasoning_effort``, ...).

``output_schema`` is reserved (the structured output an agent asks for, see
`dshkit.models.protocol.supports_native_output`): a model sends it in its API's native form or
not at all, never as a plain setting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Optional, TypedDict, Union

__all__ = [
    "COMMON_SETTINGS",
    "OUTPUT_SCHEMA",
    "ModelSettings",
    "SettingNames",
    "api_settings",
    "as_list",
    "merged_settings",
    "output_schema",
]

OUTPUT_SCHEMA = "output_schema"
"""The call-settings key of the structured output asked for (never copied into a body as is)."""


class ModelSettings(TypedDict, total=False):
    """Call settings every HTTP model understands, in the common vocabulary.

    `max_tokens`: the most tokens the answer may have. `temperature`, `top_p`: sampling.
    `stop`: a string or strings that end the answer. `seed`: deterministic sampling where
    supported. `presence_penalty`, `frequency_penalty`: repetition penalties.
    `parallel_tool_calls`: whether the model may call several tools at once.
    """

    max_tokens: int
    temperature: float
    top_p: float
    stop: Union[str, list[str]]
    seed: int
    presence_penalty: float
    frequency_penalty: float
    parallel_tool_calls: bool


COMMON_SETTINGS: tuple[str, ...] = tuple(ModelSettings.__annotations__)

SettingName = Union[str, tuple[str, Callable[[Any], Any]], None]
"""An API's name for a common setting; with a converter of the value; ``None``: not supported."""

SettingNames = Mapping[str, SettingName]


def merged_settings(defaults: Mapping[str, Any] | None, config: Mapping[str, Any] | None) -> dict[str, Any]:
    """A model's default `settings` overlaid by the request's call settings (the request wins)."""
    merged = dict(defaults or {})
    merged.update(config or {})
    return merged


def api_settings(settings: Mapping[str, Any], names: SettingNames, api: str) -> dict[str, Any]:
    """`settings` under `api`'s own names (in their order; `OUTPUT_SCHEMA` left out).

    Raises `ValueError` for a common setting the API lacks, and for one given both by its common
    name and by the API's own name (two values for one setting).
    """
    translated: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, value in settings.items():
        if key == OUTPUT_SCHEMA:
            continue
        target, converter = key, None
        if key in names:
            entry = names[key]
            if entry is None:
                raise ValueError(f"request config[{key!r}]: the {api} has no {key!r} setting")
            target, converter = (entry, None) if isinstance(entry, str) else entry
        if target in given_as:
            raise ValueError(
                f"request config[{key!r}]: sets {target!r}, which config[{given_as[target]!r}] already sets"
            )
        given_as[target] = key
        translated[target] = converter(value) if converter is not None else value
    return translated


def as_list(value: Any) -> Any:
    """A single stop string as a one-item list (what the Messages API's ``stop_sequences`` takes)."""
    return [value] if isinstance(value, str) else value


def output_schema(settings: Mapping[str, Any], *, native: bool = True) -> Optional[Mapping[str, Any]]:
    """The checked `OUTPUT_SCHEMA` setting (``name``, ``schema``, ``description``, ``strict``), if any.

    None for a model that is not `native` (``native_output = False``): the agent then asked for the
    output as a final-answer tool among the request's tools, and the setting is not sent at all.
    """
    spec = settings.get(OUTPUT_SCHEMA)
    if spec is None or not native:
        return None
    if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping):
        raise ValueError(f"request config[{OUTPUT_SCHEMA!r}]: expected a mapping with a JSON schema object under 'schema'")
    name = spec.get("name", "final_result")
    if not isinstance(name, str) or not name:
        raise ValueError(f"request config[{OUTPUT_SCHEMA!r}]['name']: expected a non-empty str, got {name!r}")
    return {
        "name": name,
        "schema": spec["schema"],
        "description": spec.get("description") or "",
        "strict": spec.get("strict") is True,
    }
