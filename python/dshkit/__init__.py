"""dshkit: LLM agent harness building blocks in which every message is an identified,
immutable value from the moment it is created.

The message vocabulary (`dshkit.llm`) is re-exported here; the durable log lives in
`dshkit.session`, the agent loop in `dshkit.agent`, models in `dshkit.models`.
"""

from __future__ import annotations

import os as _os

from dshkit import _core
from dshkit.llm import (
    FrozenDict,
    Message,
    MessageId,
    Role,
    createAssistantMessage,
    createMessage,
    createToolResultMessage,
    createUserMessage,
    create_assistant_message,
    create_message,
    create_tool_result_message,
    create_user_message,
    freeze,
    freeze_message,
    freezeMessage,
    from_json,
    json_default,
    new_message_id,
    thaw,
    to_json,
    to_json_bytes,
)

__version__ = _core.__version__

# A forked child inherits the id generator's last id: reset it so parent and child never mint
# the same "last + 1" (fresh randomness is drawn on the child's next mint).
if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_core._reset_ids_after_fork)

__all__ = [
    "FrozenDict",
    "Message",
    "MessageId",
    "Role",
    "__version__",
    "createAssistantMessage",
    "createMessage",
    "createToolResultMessage",
    "createUserMessage",
    "create_assistant_message",
    "create_message",
    "create_tool_result_message",
    "create_user_message",
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
