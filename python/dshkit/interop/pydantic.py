"""pydantic v2 support for `Message` and `FrozenDict` (their ``__get_pydantic_core_schema__``).

The native classes delegate here, so pydantic is imported only when a model uses them.

- `Message` validates from a `Message` (kept as is), a mapping, or JSON text of one, through
  `freeze_message` (an import: the id is kept); it serialises as ``Message.to_dict()``. Its JSON
  Schema is the four-field object (``id``, ``role``, ``content``, ``source``).
- `FrozenDict` validates from any mapping through `freeze` (values must be JSON values);
  it serialises as the thawed ``dict``; its JSON Schema is ``{"type": "object"}``.
A value that does not freeze is a pydantic ``ValidationError`` naming what was wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import PydanticCustomError, core_schema

from dshkit.llm import FrozenDict, Message, freeze, freeze_message, thaw

__all__ = ["frozendict_core_schema", "message_core_schema"]


def _object_schema() -> core_schema.CoreSchema:
    return core_schema.dict_schema(keys_schema=core_schema.str_schema(), values_schema=core_schema.any_schema())


def _message_input_schema() -> core_schema.CoreSchema:
    block = _object_schema()
    return core_schema.typed_dict_schema(
        {
            "id": core_schema.typed_dict_field(core_schema.str_schema(min_length=1)),
            "role": core_schema.typed_dict_field(core_schema.literal_schema(["system", "user", "assistant"])),
            "content": core_schema.typed_dict_field(
                core_schema.union_schema([core_schema.str_schema(), core_schema.list_schema(block)])
            ),
            "source": core_schema.typed_dict_field(_object_schema()),
        },
        extra_behavior="forbid",
    )


def _to_message(value: Any) -> Message:
    if isinstance(value, Message):
        return value
    try:
        if isinstance(value, (str, bytes)):
            return Message.from_json(value)
        if isinstance(value, Mapping):
            return freeze_message(value)
    except (TypeError, ValueError) as error:
        raise PydanticCustomError("dshkit_message", "not a dshkit message: {error}", {"error": str(error)}) from None
    raise PydanticCustomError("dshkit_message", "a dshkit message must be a Message or a mapping, not {kind}", {"kind": type(value).__name__})


def _to_frozendict(value: Any) -> FrozenDict[Any]:
    if isinstance(value, FrozenDict):
        return value
    if not isinstance(value, Mapping):
        raise PydanticCustomError("dshkit_frozendict", "a FrozenDict must be made from a mapping, not {kind}", {"kind": type(value).__name__})
    try:
        return freeze(value)  # type: ignore[no-any-return]
    except (TypeError, ValueError) as error:
        raise PydanticCustomError("dshkit_frozendict", "not a frozen JSON object: {error}", {"error": str(error)}) from None


def message_core_schema(cls: Any, source: Any, handler: Any) -> core_schema.CoreSchema:
    """The pydantic core schema of `Message`."""
    schema = _message_input_schema()
    return core_schema.no_info_plain_validator_function(
        _to_message,
        json_schema_input_schema=schema,
        serialization=core_schema.plain_serializer_function_ser_schema(
            lambda message: message.to_dict(), return_schema=schema
        ),
    )


def frozendict_core_schema(cls: Any, source: Any, handler: Any) -> core_schema.CoreSchema:
    """The pydantic core schema of `FrozenDict` (also `FrozenDict[...]`)."""
    schema = _object_schema()
    return core_schema.no_info_plain_validator_function(
        _to_frozendict,
        json_schema_input_schema=schema,
        serialization=core_schema.plain_serializer_function_ser_schema(thaw, return_schema=schema),
    )
