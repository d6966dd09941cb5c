"""Type stubs for the native core (`rust/`). Checked against the module by mypy's stubtest."""

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, Sequence, ValuesView
from collections.abc import Set as AbstractSet
from typing import Any, ClassVar, Literal, NoReturn, TypeVar, final, overload

from typing_extensions import Buffer, Never

from dshkit.llm import MessageId

__version__: str

_V = TypeVar("_V")
_T = TypeVar("_T")

_JSONValue = Any  # str | int | float | bool | None | FrozenDict[str, _JSONValue] | tuple[_JSONValue, ...]

@final
class FrozenDict(Mapping[str, _V]):
    """An immutable, hashable, insertion-ordered mapping of `str` keys to frozen JSON values."""

    @overload
    def __new__(cls) -> FrozenDict[Any]: ...
    @overload
    def __new__(cls, mapping: Mapping[str, _V], /, **kwargs: _V) -> FrozenDict[_V]: ...
    @overload
    def __new__(cls, iterable: Iterable[tuple[str, _V]], /, **kwargs: _V) -> FrozenDict[_V]: ...
    @overload
    def __new__(cls, /, **kwargs: _V) -> FrozenDict[_V]: ...
    def __getitem__(self, key: str, /) -> _V: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[str]: ...
    def __reversed__(self) -> Iterator[str]: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __or__(self, other: Mapping[str, _T], /) -> FrozenDict[_V | _T]: ...
    def __ror__(self, other: Mapping[str, _T], /) -> FrozenDict[_V | _T]: ...
    def __copy__(self) -> FrozenDict[_V]: ...
    def __deepcopy__(self, memo: object, /) -> FrozenDict[_V]: ...
    def __reduce__(self) -> tuple[Any, ...]: ...
    def __class_getitem__(cls, item: Any, /) -> Any: ...
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any: ...
    @overload
    def get(self, key: str, default: None = None, /) -> _V | None: ...
    @overload
    def get(self, key: str, default: _V | _T, /) -> _V | _T: ...
    def keys(self) -> KeysView[str]: ...
    def values(self) -> ValuesView[_V]: ...
    def items(self) -> ItemsView[str, _V]: ...
    def copy(self) -> FrozenDict[_V]: ...
    @classmethod
    def fromkeys(cls, iterable: Iterable[str], value: Any = None, /) -> FrozenDict[Any]: ...
    # Every mutation attempt raises TypeError; `Never` parameters make type checkers flag it too.
    def __setitem__(self, key: Never, value: Never, /) -> NoReturn: ...
    def __delitem__(self, key: Never, /) -> NoReturn: ...
    def update(self, *args: Never, **kwargs: Never) -> NoReturn: ...
    def pop(self, *args: Never) -> NoReturn: ...
    def popitem(self) -> NoReturn: ...
    def setdefault(self, *args: Never) -> NoReturn: ...
    def clear(self) -> NoReturn: ...

_Role = Literal["system", "user", "assistant"]

@final
class Message:
    """An identified, immutable message: `id`, `role`, `content` blocks and `source`."""

    __match_args__: ClassVar[tuple[Literal["id"], Literal["role"], Literal["content"], Literal["source"]]]
    def __new__(cls, *args: object, **kwargs: object) -> Message: ...  # always raises TypeError
    @property
    def id(self) -> MessageId: ...
    @property
    def role(self) -> _Role: ...
    @property
    def content(self) -> tuple[FrozenDict[Any], ...]: ...
    @property
    def source(self) -> FrozenDict[Any]: ...
    @property
    def text(self) -> str: ...
    @property
    def tool_calls(self) -> tuple[FrozenDict[Any], ...]: ...
    def with_content(self, content: str | Sequence[Mapping[str, Any]]) -> Message: ...
    def to_dict(self) -> dict[str, Any]: ...
    def to_json(self) -> str: ...
    def to_json_bytes(self) -> bytes: ...
    @classmethod
    def from_json(cls, text: str | bytes, /) -> Message: ...
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __copy__(self) -> Message: ...
    def __deepcopy__(self, memo: object, /) -> Message: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

def new_message_id() -> MessageId:
    """A new monotonic ULID (26 characters, Crockford base32)."""

def encode_ulid(value: int, /) -> str:
    """The 26-character ULID text (Crockford base32) of an int in `0 .. 2**128 - 1`."""

def crc32c(data: bytes | str, /) -> int:
    """CRC-32C (Castagnoli) of `data`, or of the UTF-8 of a `str`: an unsigned 32-bit int."""

@final
class Records:
    """The event records of a stored log: spans of its bytes (`split_records`, `verified_joined`)."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int, /) -> bytes:
        """The text of record `index` (without its checksum suffix); `ValueError` if it does not
        match a checksum left to check."""

    def check(self) -> int:
        """Check every checksum left to check: the index of the first record that fails, else -1."""

def split_records(
    content: bytes | Buffer, start: int, end: int, sealed: bool, /, defer_checks: bool = False
) -> tuple[Records | None, int]:
    """The lines of `content[start:end]` (`bytes`, or a read-only buffer such as a file mapped
    read-only, held while the records are) as records, checksums checked when `sealed`: `(records, -1)`,
    or `(None, index)` of the first line whose checksum fails. `defer_checks`: a sealed line's
    checksum is compared where its record is first read (`decode_records`, `Records.check`)."""

def verified_rows(rows: Iterable[tuple[Any, Any]], /) -> tuple[list[Any] | None, int]:
    """The texts of `(text, stored CRC-32C)` rows, each checked: `(texts, -1)`, or `(None, index)`
    of the first row whose checksum is not an int matching its text."""

def verified_joined(
    bodies: Buffer | Sequence[Buffer], crcs: str | Sequence[str], /, defer_checks: bool = False
) -> tuple[Records | None, int]:
    """Records read from a table as one value: `bodies` joined by newlines (or a list or tuple of
    parts read as if joined by newlines, kept, not copied), `crcs` their stored CRC-32Cs as comma-separated
    decimals; each checked: `(records, -1)`, or `(None, index)` of the first record whose checksum
    fails, or when records and checksums do not pair up. `crcs` may be a list per part (each part
    then paired with its own, large parts on two threads). `defer_checks`: each CRC-32C is
    compared where its record is first read (`Records`)."""

def decode_records(
    records: Records | Sequence[bytes | str], event_class: type, /
) -> tuple[list[Any], bytes, list[Any], bytearray, bytes, list[Any]] | int:
    """Every record as `EventLog` columns `(types, times, messages, blob, ends, pending)`; `pending`
    holds, in seq order, each message event decoded, the index of each record left to Python, and
    each run of appends vouched for natively as `(seqs, tags)` (see `Surface.fold_appends`). The
    index of the first record that fails a checksum left to check, instead, if one does."""

def decode_original_records(
    records: Records | Sequence[bytes | str], verbatim: AbstractSet[str], ignorable: AbstractSet[str], rows: Mapping[str, str], /
) -> tuple[list[Any], bytes, list[Message | None], bytearray, bytes, list[tuple[Any, ...]]] | None:
    """The original harness's event records as `EventLog` columns `(types, times, messages, blob,
    ends, pending)` (`rust/original/`): the records whose dshkit event is plain read natively, the
    message appends it vouches for as `Message`s; `pending` holds, in seq order, `(record index,
    seq)` of each record left to Python and `(seqs, tags, record indexes, hidden seqs)` of each run
    of vouched appends (see `Surface.fold_appends`; hidden: those whose tag is `False`). `None`
    when the whole log must take the Python path (a packed row not read natively)."""

@final
class OriginalLines(Sequence[bytes]):
    """An original-harness log's lines as spans of its bytes (`rust/original/lines.rs`): a line is
    made `bytes` when asked for; a slice (no step) shares the bytes."""

    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, index: int, /) -> bytes: ...
    @overload
    def __getitem__(self, index: slice, /) -> OriginalLines: ...

def split_original_lines(content: Buffer, start: int, /, *rest: Buffer) -> OriginalLines:
    """`b"".join((content, *rest))[start:].split(b"\\n")` as `OriginalLines`, line ends found a
    block at a time, nothing copied nor joined (an original-harness log's lines,
    `rust/original/lines.rs`): each part `bytes` or a read-only contiguous buffer (a mapped log),
    empty parts left out, each other part followed by another ending with a newline (`ValueError`
    otherwise)."""

def compact_events(
    events: list[Any], count: int, offset: int, /
) -> tuple[list[str], bytes, list[Message | None], bytes, bytes, list[tuple[int, Any]], list[tuple[int, Any]]]:
    """The first `count` events as `EventLog` columns whose blob is `offset` bytes long so far:
    `(types, times, messages, blob, ends, ops, kept)`; `ops` and `kept` are `(seq, surface_op)` and
    `(seq, event)` of the events whose operation is not "append" and of those kept whole."""

def new_event(cls: type[_T], fields: tuple[Any, ...], /) -> _T:
    """`tuple.__new__(cls, fields)` for a tuple subclass without `__dict__`, untracked by the
    cyclic GC when every field is (exact tuples among them untracked first); `TypeError` for any
    other class."""

def vouch_new_append(
    event_type: object, data: object, surface_op: object, source_seqs: object, seq: int, /
) -> tuple[Any, Message, Any] | None:
    """`(frozen data, message, tag)` if a message event about to be appended as event `seq` passes
    every append rule that does not depend on the log (`rust/log/message_vouch.rs`; the tag as in
    `decode_records`' runs), else `None`: the full checks decide."""

@final
class SurfaceState:
    """The state a surface folds into (`rust/log/surface_fold.rs`), owned by this object and held by
    `Surface`: the ids seen, the nodes, their event seqs and positions, and the pairing of tool calls
    (`paired` says whether it is current; `positions_current`, whether `positions` is)."""

    paired: bool
    positions_current: bool
    nodes: list[Message]
    def __init__(self) -> None: ...
    @property
    def seen(self) -> dict[str, int]:
        """Every message id ever logged -> the seq of its first event."""
    @property
    def positions(self) -> dict[str, int]:
        """Message id -> position, for the nodes on the surface, while `positions_current`."""
    @property
    def node_seqs(self) -> list[int]:
        """The seq of the event that put each node on the surface."""
    @property
    def pending(self) -> dict[str, int]:
        """Call id -> index into `pairs`, for the calls without a result."""
    @property
    def pairs(self) -> list[tuple[int, int | None, str]]:
        """`(call position, result position or None, call id)` per tool call on the surface."""
    def fold_appends(
        self,
        seqs: list[int] | tuple[int, ...],
        tags: list[Any] | tuple[Any, ...],
        messages: list[Any] | dict[int, Any],
        start: int,
        /,
    ) -> int:
        """Check and fold the vouched appends `seqs[start:]` into this state (`Surface.fold_appends`):
        the index of the first append breaking a stateful rule, nothing of it folded, or `len(seqs)`.
        Raises `TypeError` for arguments of the wrong shape, `ValueError` if the pairing is not
        current."""

def vouch_plain_append(event_type: object, data: object, /) -> FrozenDict[Any] | None:
    """`data` deep-frozen if `event_type` is a plain type of the rules given to `set_plain_rules`
    (`rust/log/plain_vouch.rs`), `data` a `dict` (or a `FrozenDict`, given back as is) and the frozen
    data passes the type's rule, else `None`: the Python rule decides. Raises what `freeze(data)`
    raises for data that cannot be frozen."""

def set_plain_rules(rules: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]], /) -> None:
    """Give the native passes (`vouch_plain_append`, the record scan of `decode_records`) the plain
    types' rules, `{type: (int fields, str fields, reason_with_kind)}`, once per process
    (`rust/log/plain_rules.rs`; `dshkit.session.events` gives `PLAIN_EVENT_RULES`). Raises
    `TypeError`/`ValueError` for a malformed table, a field the native passes do not read, or a
    second, different table."""

def freeze(value: object, /) -> _JSONValue:
    """Deep-freeze and detach a JSON-like tree (a lone surrogate in a str becomes U+FFFD)."""

def thaw(value: object, /) -> Any:
    """A plain, mutable, detached `dict`/`list` tree."""

def to_json(value: object, /) -> str:
    """Compact JSON text of a (frozen or plain) JSON tree or a `Message`."""

def to_json_bytes(value: object, /) -> bytes:
    """`to_json` as UTF-8 `bytes`, for writers of files, sockets and logs."""

def from_json(text: str | bytes, /) -> _JSONValue:
    """Parse JSON text straight into a frozen tree."""

def json_default(value: object, /) -> Any:
    """`default=` hook that lets `json.dumps` and `orjson.dumps` serialise frozen values."""

def create_message(
    *, role: _Role, content: str | Sequence[Mapping[str, Any]], source: Mapping[str, Any]
) -> Message:
    """Mint an id, detach and deep-freeze: a new message of any role."""

def create_user_message(
    content: str | Sequence[Mapping[str, Any]], *, source: Mapping[str, Any]
) -> Message:
    """A new user-role message."""

def create_assistant_message(
    content: str | Sequence[Mapping[str, Any]],
    *,
    provider: str,
    model: str,
    replay_state: object = None,
) -> Message:
    """A new assistant message with source `{"kind": "model", ...}`."""

def create_tool_result_message(
    call_id: str, content: str | Sequence[Mapping[str, Any]], *, is_error: bool = False
) -> Message:
    """A new user-role message holding exactly one `tool_result` block for `call_id`."""

def freeze_message(message: Message | Mapping[str, Any], /) -> Message:
    """Import boundary: a frozen, detached `Message` keeping the given id."""

def _reset_ids_after_fork() -> None: ...
def _read_message_record_both_ways(
    text: str, seq: int, event_type: str, /
) -> tuple[tuple[Any, ...] | None, tuple[Any, ...] | None, bool]:
    """For the tests: a message record read from its text and from its tape, and whether it was taped."""

def _decode_original_records_taped(
    records: Records | Sequence[bytes | str], verbatim: AbstractSet[str], ignorable: AbstractSet[str], rows: Mapping[str, str], /
) -> tuple[tuple[list[Any], bytes, list[Message | None], bytearray, bytes, list[tuple[Any, ...]]] | None, int]:
    """For the tests: `decode_original_records` with every record read as the thread ahead reads it
    (message appends rewritten and taped), and how many were read from their tapes."""
