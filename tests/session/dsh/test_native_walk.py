"""The native reader's one walk of a message record (`rust/original/message_text.rs`) and its line
splitter (`split_original_lines`, `rust/original/lines.rs`), against the Python path they stand in for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dshkit._core import OriginalLines, _decode_original_records_taped, decode_original_records, split_original_lines
from dshkit.session import SessionRecoveryWarning
from dshkit.session.dsh.chunk_rows import ROW_TYPES
from dshkit.session.dsh.jsonl_store import DshJsonlStore
from dshkit.session.dsh.vocabulary import IGNORABLE_TYPES, VERBATIM_TYPES
from tests.session.dsh.scenarios import SCENARIOS
from tests.session.dsh.test_native_read import _conversation, assert_same_both_ways


def _left_to_python(records: list[bytes]) -> list[int]:
    columns = decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert columns is not None
    return [index for index, *rest in columns[5] if not rest[1:]]


def test_a_conversation_written_with_whitespace_everywhere_is_read_natively() -> None:
    compact = _conversation()
    # Indented JSON with its newlines made spaces: whitespace after every `{` `[` `,` `:` and before every `}` `]`.
    spaced = [b" " + json.dumps(json.loads(line), indent=1, separators=(" ,", " : ")).replace("\n", " ").encode() + b"\t" for line in compact]
    assert _left_to_python(spaced) == []
    assert assert_same_both_ways(spaced) == assert_same_both_ways(compact)


def test_a_conversation_with_data_before_type_is_read_natively() -> None:
    compact = _conversation()
    # The scan rewrites a message's data as it meets it when `type` came first; here it cannot.
    data_first = [json.dumps({"data": record.pop("data"), **record}, separators=(",", ":")).encode()
                  for record in map(json.loads, compact)]
    assert _left_to_python(data_first) == []
    assert assert_same_both_ways(data_first) == assert_same_both_ways(compact)


# Keys repeated in the bytes (a dict cannot say it): record index, text replaced, replacement,
# whether the native pass still takes the record (a repeated key the rewrite lets through is
# refused by `log/`'s reader of the rewritten record).
REPEATED_KEYS = {
    "message twice": (3, b'"message":', b'"message":{"content":[],"source":{"kind":"model"},"role":"assistant","id":"x"},"message":', False),
    "content twice": (2, b'"content":', b'"content":[],"content":', False),
    "finishReason twice": (6, b'"finishReason":"stop"', b'"finishReason":"stop","finishReason":"stop"', False),
    "finish_reason twice alone": (6, b'"finishReason":"stop"', b'"finish_reason":"stop","finish_reason":"length"', False),
    "usage twice": (3, b'"usage":', b'"usage":{"inputTokens":1},"usage":', False),
    "source twice": (2, b'"source":', b'"source":{"kind":"user"},"source":', False),
    "an escaped key in a message": (2, b'"role":', b'"r\\u006fle":', False),
    "an escaped key beside it": (3, b'"usage":', b'"u\\u0073age":', False),
}


@pytest.mark.parametrize("name", sorted(REPEATED_KEYS))
def test_repeated_and_escaped_keys_read_the_same_both_ways(name: str) -> None:
    index, old, new, native = REPEATED_KEYS[name]
    records = _conversation()
    assert old in records[index]
    records[index] = records[index].replace(old, new, 1)
    assert_same_both_ways(records, native=True)
    assert (index not in _left_to_python(records)) is native


@pytest.mark.parametrize("text", [b"", b"\n", b"a", b"a\n", b"a\nb", b"\n\nab\n", b"h\n" + b"x" * 40 + b"\n" + b"\xc3\xa9" * 20, b"\r\n\r\n"])
def test_lines_split_as_bytes_split_does(text: bytes) -> None:
    for start in range(len(text) + 2):
        lines, expected = split_original_lines(text, start), text[start:].split(b"\n")
        assert isinstance(lines, OriginalLines) and list(lines) == expected and len(lines) == len(expected)
        for index in range(-len(expected), len(expected)):
            assert lines[index] == expected[index]
        for first, stop in [(0, -1), (1, None), (-2, None), (3, 1), (0, 99)]:
            part = lines[first:stop]
            assert isinstance(part, OriginalLines) and list(part) == expected[first:stop]


def test_lines_out_of_range_or_stepped_are_refused() -> None:
    lines = split_original_lines(b"h\na\nb\n", 2)
    for index in (3, -4):
        with pytest.raises(IndexError, match="line index out of range"):
            lines[index]
    with pytest.raises(ValueError, match="no step"):
        lines[::2]
    with pytest.raises(TypeError):
        lines["0"]  # type: ignore[call-overload]


def test_lines_decode_as_the_list_of_their_bytes_does() -> None:
    records = _conversation()
    lines = split_original_lines(b"".join(record + b"\n" for record in records), 0)[:-1]
    assert isinstance(lines, OriginalLines) and list(lines) == records
    assert decode_original_records(lines, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES) == decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert _decode_original_records_taped(lines, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES) == _decode_original_records_taped(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)


def test_lines_of_a_str_or_a_negative_start_are_refused() -> None:
    with pytest.raises(TypeError):
        split_original_lines("a\nb", 0)  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        split_original_lines(b"a\nb", -1)


def test_a_stored_log_loads_as_lines_with_its_crash_tail_cut(tmp_path: Path) -> None:
    path = SCENARIOS["text_and_reasoning"]().write(tmp_path / "session.jsonl")
    whole = path.read_bytes().split(b"\n")[1:-1]
    with open(path, "ab") as file:  # after the last turn/end: an unparsable line, then a torn one
        file.write(b'{"type":"turn/start",\n{"type":"turn/start","seq":')
    store = DshJsonlStore(path)
    with pytest.warns(SessionRecoveryWarning, match="not JSON"):
        _header, lines = store.load("none", read_only=True)
    store.close()
    assert isinstance(lines, OriginalLines) and list(lines) == whole
