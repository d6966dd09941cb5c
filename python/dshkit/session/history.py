"""`History`: the immutable sequence `session.messages()` returns, O(1) to take after an append.

A `History` is a prefix view of an append-only list the surface owns: taking one stores the list
and its current length, so handing out the history after each append copies nothing and every
version shares the same list. The surface only ever appends to a list it has handed out; a replace
copies the list first, so a view never sees its contents change. A view behaves as the tuple of
its messages: equal (and hash-equal) to that tuple, same repr, slices and concatenation give
tuples.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, overload

from dshkit import Message


class History(Sequence[Message]):
    """An immutable sequence of `Message` values (the model-visible history), shared, not copied."""

    __slots__ = ("_items", "_len", "_hash")

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        """A history of `messages`; `TypeError` naming the first item that is not a `Message`."""
        items = list(messages)
        for index, message in enumerate(items):
            if not isinstance(message, Message):
                raise TypeError(f"History item {index} must be a Message, not {type(message).__name__}")
        self._items = items
        self._len = len(items)
        self._hash: int | None = None

    @classmethod
    def _view(cls, items: list[Message], length: int) -> History:
        """The first `length` items of `items`, a list that is only ever appended to from now on."""
        view = cls.__new__(cls)
        view._items = items
        view._len = length
        view._hash = None
        return view

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...
    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if isinstance(index, slice):
            items = self._items
            return tuple([items[position] for position in range(*index.indices(self._len))])
        length = self._len
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError("History index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        return islice(self._items, self._len)

    def __reversed__(self) -> Iterator[Message]:
        items = self._items
        return (items[position] for position in range(self._len - 1, -1, -1))

    def __contains__(self, value: object) -> bool:
        return any(item is value or item == value for item in self)

    def to_tuple(self) -> tuple[Message, ...]:
        """The same messages as a `tuple` (an O(n) copy)."""
        items = self._items
        return tuple(items) if self._len == len(items) else tuple(islice(items, self._len))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, History):
            if self._len != other._len:
                return False
            if self._items is other._items:
                return True
            return self.to_tuple() == other.to_tuple()
        if isinstance(other, tuple):
            return len(other) == self._len and self.to_tuple() == other
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self.to_tuple())
        return self._hash

    def __add__(self, other: object) -> tuple[Any, ...]:
        if isinstance(other, (tuple, History)):
            return self.to_tuple() + tuple(other)
        return NotImplemented

    def __radd__(self, other: object) -> tuple[Any, ...]:
        if isinstance(other, tuple):
            return other + self.to_tuple()
        return NotImplemented

    def __repr__(self) -> str:
        return repr(self.to_tuple())

    def __reduce__(self) -> tuple[Any, ...]:
        return (History, (self.to_tuple(),))

    def __copy__(self) -> History:
        return self

    def __deepcopy__(self, memo: object) -> History:
        return self


__all__ = ["History"]
