"""The model request as a pure function of the log: `ModelRequest` and `project_request`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dshkit import FrozenDict, Message, freeze, thaw

from dshkit.session.events import Event, latest_header
from dshkit.session.history import History
from dshkit.session._surface import Surface

if TYPE_CHECKING:
    from dshkit.session.attachments import Attachments
    from dshkit.session.session import Session

_EMPTY: FrozenDict[Any] = FrozenDict()


class ModelRequest:
    """A frozen model request: the derived messages plus the request header's facts.

    `messages` holds the same `Message` objects the session derived (same ids), as a tuple made
    on first read: a request built from a session's `History` shares it until then, so keeping
    many requests (a scripted model does) costs no copy of the history each; `system`,
    `tools` and `config` are deep-frozen; `header_seq` is the seq of the `request/header` event
    they came from (`None` when none was logged). `attachments` reads the bytes the messages'
    attachment blocks refer to (the session's `Attachments`; not part of equality: the bytes
    are fixed by their ids), which a model inlines when it projects the request.
    """

    __slots__ = ("_messages", "_messages_tuple", "system", "tools", "config", "header_seq", "attachments")
    _messages: tuple[Message, ...] | History
    _messages_tuple: tuple[Message, ...] | None
    system: Any
    tools: tuple[FrozenDict[Any], ...]
    config: FrozenDict[Any]
    header_seq: int | None
    attachments: Attachments | None

    def __init__(
        self,
        messages: Sequence[Message],
        *,
        system: Any = None,
        tools: Sequence[Mapping[str, Any]] = (),
        config: Mapping[str, Any] | None = None,
        header_seq: int | None = None,
        attachments: Attachments | None = None,
    ) -> None:
        if type(messages) is not History:  # a History holds Message values only
            messages = tuple(messages)
            for index, message in enumerate(messages):
                if not isinstance(message, Message):
                    raise TypeError(f"messages[{index}] must be a Message, not {type(message).__name__}")
        # Type tests before the ABC ones: a request per model call, from a header's frozen values.
        if type(tools) is not tuple and isinstance(tools, (str, bytes, Mapping)):
            raise TypeError("tools must be a sequence of tool specs (mappings)")
        frozen_tools = freeze(tuple(tools))
        for index, tool in enumerate(frozen_tools):
            if type(tool) is not FrozenDict and not isinstance(tool, Mapping):
                raise TypeError(f"tools[{index}] must be a mapping, not {type(tool).__name__}")
        if config is not None and type(config) is not FrozenDict and not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping, not {type(config).__name__}")
        config = _EMPTY if config is None else freeze(config)
        self._fill(messages, freeze(system), frozen_tools, config, header_seq, attachments)

    def _fill(
        self, messages: Any, system: Any, tools: Any, config: Any, header_seq: int | None, attachments: Attachments | None
    ) -> None:
        # Each slot's own setter (this class refuses __setattr__); object.__setattr__ would look
        # every name up again: ~1.9k instructions more per request on 3.11.
        set_slot = _SLOT_SETTERS
        set_slot["_messages"](self, messages)
        set_slot["_messages_tuple"](self, messages if type(messages) is tuple else None)
        set_slot["system"](self, system)
        set_slot["tools"](self, tools)
        set_slot["config"](self, config)
        set_slot["header_seq"](self, header_seq)
        set_slot["attachments"](self, attachments)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ModelRequest is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ModelRequest is immutable: cannot delete {name!r}")

    @property
    def messages(self) -> tuple[Message, ...]:
        """The request's messages, in order (the same `Message` objects the session derived)."""
        messages = self._messages_tuple
        if messages is None:
            history = self._messages
            assert type(history) is History  # a tuple is its own _messages_tuple
            messages = history.to_tuple()
            _SLOT_SETTERS["_messages_tuple"](self, messages)
        return messages

    def _key(self) -> tuple[Any, ...]:
        return (self._messages, self.system, self.tools, self.config)

    def __eq__(self, other: object) -> bool:
        """Equal when messages, system, tools and config are equal (`header_seq` is provenance)."""
        if not isinstance(other, ModelRequest):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"ModelRequest(messages=<{len(self._messages)} messages>, system={self.system!r}, "
            f"tools=<{len(self.tools)} tools>, config={self.config!r}, header_seq={self.header_seq!r})"
        )

    def __copy__(self) -> ModelRequest:
        return self

    def __deepcopy__(self, memo: object) -> ModelRequest:
        return self

    def to_dict(self) -> dict[str, Any]:
        """A plain, mutable, detached dict (messages as `Message.to_dict()` mappings)."""
        return {
            "messages": [message.to_dict() for message in self.messages],
            "system": thaw(self.system),
            "tools": thaw(self.tools),
            "config": thaw(self.config),
        }


# The slots' member descriptors' setters, which `ModelRequest.__init__` writes through.
_SLOT_SETTERS = {name: ModelRequest.__dict__[name].__set__ for name in ModelRequest.__slots__}


def derive_messages(events: Sequence[Event]) -> History:
    """Fold a sequence of events (for example a log prefix) into its model-visible messages."""
    surface = Surface()
    for event in events:
        surface.fold(event)
    return surface.messages()


def project_request(
    session: Session,
    *,
    system: Any = None,
    tools: Sequence[Mapping[str, Any]] = (),
    config: Mapping[str, Any] | None = None,
    at_seq: int | None = None,
) -> ModelRequest:
    """The frozen request the log defines: derived messages plus the latest `request/header`.

    The header's `system`, `tools` and `config` are the base; a `system` or `config` that is not
    `None`, or non-empty `tools`, overrides that field. `at_seq` projects the log as it was
    right after event `at_seq` (to rebuild a request that was sent earlier). The request carries
    the session's attachments, so a model can inline the bytes its blocks refer to.
    """
    if at_seq is None:
        messages = session.messages()
        header_event = session.request_header
    else:
        if type(at_seq) is not int or not 0 <= at_seq < len(session.events):
            raise ValueError(f"at_seq {at_seq!r} is not the seq of an event in the log (0..{len(session.events) - 1})")
        prefix = session.events[: at_seq + 1]
        messages = derive_messages(prefix)
        header_event = latest_header(prefix)
    global _last_header_fields
    from_header = header_event is not None and system is None and not tools and config is None
    if from_header:
        last = _last_header_fields
        if last[0] is header_event:  # an agent's step: the header its previous request had
            request = ModelRequest.__new__(ModelRequest)
            request._fill(messages, last[1], last[2], last[3], header_event.seq, session.attachments)
            return request
    header: Mapping[str, Any] = header_event.data["header"] if header_event is not None else _EMPTY
    request = ModelRequest(
        messages,
        system=system if system is not None else header.get("system"),
        tools=tools if tools else header.get("tools", ()),
        config=config if config is not None else header.get("config"),
        header_seq=header_event.seq if header_event is not None else None,
        attachments=session.attachments,
    )
    if from_header:
        _last_header_fields = (header_event, request.system, request.tools, request.config)
    return request


# The fields of the last request `project_request` built from a header alone, as `ModelRequest`
# checked and froze them: (header event, system, tools, config). An agent projects a request a
# step under the same header, so they are checked once per header, not once per step. The event
# is immutable and kept alive here, so `is` identifies it.
_last_header_fields: tuple[Any, ...] = (None,)

