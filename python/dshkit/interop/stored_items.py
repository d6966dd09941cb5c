"""`StoredItems`: the Agents SDK items a `DshkitSession` holds, in order, indexed by identity.

`DshkitSession` reads them from its log once, then keeps them in step with every write, so an
``add_items`` converts only its batch and tells a retried batch from a new one in O(batch):

- an item's identity (`item_identity`) is its ``id`` (not the SDK's ``"__fake_id__"``
  placeholder), else its type and ``call_id`` (a ``function_call_output`` has no id of its own:
  it is the output of one call). A ``function_call`` that uses a call id again (some providers
  number calls per step) makes the old output the answer of the old call only.
- a batch re-adds stored items (`split_batch`) when an item stored under its identity equals the
  given one, and an id-less item equals the stored neighbour of such an item (the user input
  saved with an answer), or when the whole batch equals the latest stored items. The re-added
  items must come first: the rest of the batch is new and goes after the stored items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["FAKE_ITEM_ID", "StoredItems", "item_identity"]

FAKE_ITEM_ID = "__fake_id__"  # the Agents SDK's id for items of providers that mint none

Identity = tuple[str, ...]


def item_identity(item: Mapping[str, Any]) -> Identity | None:
    """What names `item` among a session's items: `("id", id)`, `("call", type, call_id)`, or `None`."""
    item_id = item.get("id")
    if isinstance(item_id, str) and item_id != FAKE_ITEM_ID:
        return ("id", item_id)
    call_id = item.get("call_id")
    if isinstance(call_id, str):
        return ("call", str(item.get("type")), call_id)
    return None


def _output_identity(call: Mapping[str, Any]) -> Identity | None:
    """The identity of the output that answers `call`, if `call` is a function call."""
    call_id = call.get("call_id")
    if call.get("type") == "function_call" and isinstance(call_id, str):
        return ("call", "function_call_output", call_id)
    return None


class StoredItems:
    """A session's items, oldest first, and the position of each identified one."""

    __slots__ = ("_items", "_positions")

    def __init__(self, items: Iterable[dict[str, Any]] = ()) -> None:
        self._items: list[dict[str, Any]] = []
        self._positions: dict[Identity, int] = {}
        self.extend(items)

    def __len__(self) -> int:
        return len(self._items)

    def tail(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The latest `limit` items (all when `None`), oldest first; the list is new, the items are not."""
        if limit is None:
            return list(self._items)
        return self._items[-limit:] if limit > 0 else []

    def extend(self, items: Iterable[dict[str, Any]]) -> None:
        """Add items after the others (as the log now holds them)."""
        for item in items:
            answer = _output_identity(item)
            if answer is not None:
                self._positions.pop(answer, None)
            identity = item_identity(item)
            if identity is not None:
                self._positions[identity] = len(self._items)
            self._items.append(item)

    def pop(self) -> dict[str, Any]:
        """Remove the latest item and return it; `IndexError` if there is none."""
        item = self._items.pop()
        identity = item_identity(item)
        if identity is not None and self._positions.get(identity) == len(self._items):
            del self._positions[identity]
        return item

    def clear(self) -> None:
        """Forget every item."""
        self._items.clear()
        self._positions.clear()

    def split_batch(self, batch: Sequence[Mapping[str, Any]]) -> int:
        """How many leading items of `batch` are stored already (a retry); the items after them are new.

        `ValueError` for a batch that contradicts the stored items: an item under a stored
        identity that differs from the stored one, or a stored item after a new one.
        """
        items = self._items
        if batch and items[-len(batch):] == list(batch):
            return len(batch)
        positions: list[int | None] = [None] * len(batch)
        answered_anew: set[Identity] = set()  # outputs of calls this batch makes anew (a call id used again)
        for index, item in enumerate(batch):
            identity = item_identity(item)
            position = None if identity is None or identity in answered_anew else self._positions.get(identity)
            if position is None:
                answer = _output_identity(item)
                if answer is not None:
                    answered_anew.add(answer)
                continue
            if items[position] != item:
                raise ValueError(
                    f"item {index} of the batch ({_describe(identity)}) differs from the item stored under that "
                    f"identity (item {position}): a retried batch must repeat the items it re-adds exactly"
                )
            positions[index] = position
        self._place_neighbours(batch, positions)
        stored = 0
        while stored < len(batch) and positions[stored] is not None:
            stored += 1
        for index in range(stored + 1, len(batch)):
            if positions[index] is not None:
                raise ValueError(
                    f"item {index} of the batch is stored already (item {positions[index]}) but item {stored} "
                    "before it is new: a retried batch re-adds stored items only before the new ones"
                )
        return stored

    def _place_neighbours(self, batch: Sequence[Mapping[str, Any]], positions: list[int | None]) -> None:
        """Mark each id-less item equal to the stored neighbour of a placed item as stored there."""
        items = self._items
        for step, indices in ((1, range(1, len(batch))), (-1, range(len(batch) - 2, -1, -1))):
            for index in indices:
                neighbour = positions[index - step]
                if positions[index] is not None or neighbour is None or item_identity(batch[index]) is not None:
                    continue
                position = neighbour + step
                if 0 <= position < len(items) and items[position] == batch[index]:
                    positions[index] = position


def _describe(identity: Identity | None) -> str:
    if identity is None:
        return "no id"
    if identity[0] == "id":
        return f"id {identity[1]!r}"
    return f"{identity[1]} of call {identity[2]!r}"
