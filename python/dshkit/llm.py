"""The message vocabulary: identity, frozen values, and the only ways to get a `Message`.

Everything here is native (``dshkit._core``); this module names it, adds the `MessageId` type and
the camelCase aliases kept for ports of the original harness. The creation helpers are the native
functions themselves, not Python wrappers, so that creating a message costs one native call.
"""

from __future__ import annotations

from typing import Literal, NewType

from dshkit._core import (
    FrozenDict,
    Message,
    create_assistant_message,
    create_message,
    create_tool_result_message,
    create_user_message,
    encode_ulid,
    freeze,
    freeze_message,
    from_json,
    json_default,
    new_message_id,
    thaw,
    to_json,
    to_json_bytes,
)

MessageId = NewType("MessageId", str)
"""Opaque message identity: a plain ``str`` at run time (a ULID when minted here)."""

Role = Literal["system", "user", "assistant"]

# Aliases for ports of the original (TypeScript) harness; the snake_case names are canonical.
createMessage = create_message
createUserMessage = create_user_message
createAssistantMessage = create_assistant_message
createToolResultMessage = create_tool_result_message
freezeMessage = freeze_message

__all__ = [
    "FrozenDict",
    "Message",
    "MessageId",
    "Role",
    "createAssistantMessage",
    "createMessage",
    "createToolResultMessage",
    "createUserMessage",
    "create_assistant_message",
    "create_message",
    "create_tool_result_message",
    "create_user_message",
    "encode_ulid",
    "freeze",
    "freezeMessage",
    "freeze_message",
    "from_json",
    "json_default",
    "new_message_id",
    "thaw",
    "to_json",
    "to_json_bytes",
]
