"""Checks on the messages the agent is handed: user input, message batches, rewrites.

Every check raises `TypeError` (not a message, wrong role) or `ValueError` (a different message
where a rewrite was expected) naming `where` the bad value came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dshkit.llm import Message


def check_user_message(message: object, where: str) -> Message:
    """`message` if it is a complete user-role `Message`, else `TypeError` saying what it was."""
    if not isinstance(message, Message):
        raise TypeError(
            f"{where}: expected a user-role Message (create one with dshkit.create_user_message, "
            f"or import one with dshkit.freeze_message), got {type(message).__name__}"
        )
    if message.role != "user":
        raise TypeError(f"{where}: expected a user-role Message, got role {message.role!r} (id {message.id})")
    return message


def check_message_batch(messages: object, where: str) -> tuple[Message, ...]:
    """`messages` as a tuple if it is an iterable of `Message` values, else `TypeError` naming `where`."""
    if isinstance(messages, (str, bytes, Message, Mapping)) or not isinstance(messages, Iterable):
        raise TypeError(f"{where}: expected an iterable of Message, got {type(messages).__name__}")
    batch = tuple(messages)
    for index, message in enumerate(batch):
        if not isinstance(message, Message):
            raise TypeError(f"{where}[{index}]: expected a Message, got {type(message).__name__}")
    return batch


def check_rewrite(original: Message, new: object, where: str = "rewrite", *, held: str = "claimed") -> Message:
    """`new` if it is a rewrite of `original`: same id, role and source; only the content may change.

    `TypeError` when `new` is not a `Message`; `ValueError` naming the part that differs
    otherwise. `held` says how `original` is held where the check runs ("claimed", "pending").
    """
    if not isinstance(new, Message):
        raise TypeError(f"{where}: expected a rewrite of message {original.id} (a Message), got {type(new).__name__}")
    if new.id != original.id:
        differs = f"id {new.id} instead of {original.id}"
    elif new.role != original.role:
        differs = f"role {new.role!r} instead of {original.role!r}"
    elif new.source != original.source:
        differs = f"source {dict(new.source)!r} instead of {dict(original.source)!r}"
    else:
        return new
    raise ValueError(
        f"{where}: a different message under {held} id {original.id} ({differs}); a rewrite keeps the id, "
        "role and source and changes only the content (message.with_content(...))"
    )


__all__ = ["check_message_batch", "check_rewrite", "check_user_message"]
