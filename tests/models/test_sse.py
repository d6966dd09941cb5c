"""The server-sent events decoder: line endings, fields, dispatch, split reads, bad bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dshkit.models.sse import SSEDecodeError, SSEDecoder, ServerSentEvent


def decode(*reads: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = [event for read in reads for event in decoder.feed(read)]
    return events + decoder.close()


def test_data_lines_dispatch_on_blank_line() -> None:
    assert decode(b"data: one\n\ndata: two\n\n") == [ServerSentEvent(data="one"), ServerSentEvent(data="two")]


def test_multiple_data_lines_join_with_newline() -> None:
    assert decode(b"data: a\ndata: b\ndata:\n\n") == [ServerSentEvent(data="a\nb\n")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(newline: bytes) -> None:
    body = b"event: x" + newline + b"data: 1" + newline + newline + b"data: 2" + newline + newline
    assert decode(body) == [ServerSentEvent(event="x", data="1"), ServerSentEvent(data="2")]


def test_crlf_split_across_reads_is_one_line_ending() -> None:
    # A CR ending one read and an LF starting the next are one line ending, not a blank line.
    assert decode(b"data: a\r", b"\ndata: b\r\n\r\n") == [ServerSentEvent(data="a\nb")]


def test_comments_and_unknown_fields_are_ignored() -> None:
    body = b": keep-alive\n\nfoo: bar\ndata: x\n: note\n\n"
    assert decode(body) == [ServerSentEvent(data="x")]


def test_only_one_leading_space_is_removed() -> None:
    assert decode(b"data:  two spaces\ndata:none\n\n") == [ServerSentEvent(data=" two spaces\nnone")]


def test_field_without_colon_has_empty_value() -> None:
    assert decode(b"data\n\n") == [ServerSentEvent(data="")]


def test_event_without_data_is_not_dispatched() -> None:
    assert decode(b"event: ping\n\ndata: y\n\n") == [ServerSentEvent(data="y")]


def test_id_and_retry_are_kept() -> None:
    events = decode(b"id: 7\nretry: 1500\ndata: a\n\ndata: b\n\nretry: soon\nid: bad\0id\ndata: c\n\n")
    assert [(e.id, e.retry) for e in events] == [("7", 1500), ("7", 1500), ("7", 1500)]


def test_leading_byte_order_mark_is_dropped() -> None:
    assert decode(b"\xef\xbb\xbfdata: x\n\n") == [ServerSentEvent(data="x")]


def test_utf8_split_inside_a_character() -> None:
    encoded = "data: 深度求索\n\n".encode()
    assert decode(encoded[:8], encoded[8:]) == [ServerSentEvent(data="深度求索")]


def test_unterminated_event_at_end_is_discarded() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: complete\n\ndata: partial") == [ServerSentEvent(data="complete")]
    assert decoder.close() == []


def test_invalid_utf8_names_the_offset() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: ok\n\n")
    with pytest.raises(SSEDecodeError, match=r"invalid byte at offset 16"):
        decoder.feed(b"data: \xff\xfe\n\n")


def test_truncated_utf8_at_close_is_an_error() -> None:
    decoder = SSEDecoder()
    decoder.feed("data: é".encode()[:-1])
    with pytest.raises(SSEDecodeError, match="truncated character"):
        decoder.close()


events_strategy = st.lists(
    st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",))), min_size=1, max_size=3),
    max_size=5,
)


@given(events=events_strategy, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6), newline=st.sampled_from(["\n", "\r\n", "\r"]))
def test_any_split_of_the_body_gives_the_same_events(events: list[list[str]], cuts: list[int], newline: str) -> None:
    body = "".join("".join(f"data: {line}{newline}" for line in lines) + newline for lines in events).encode()
    points = sorted({min(cut, len(body)) for cut in cuts})
    reads = [body[start:end] for start, end in zip([0, *points], [*points, len(body)])]
    expected = [ServerSentEvent(data="\n".join(lines)) for lines in events]
    assert decode(*reads) == expected


RICH_BODY = (
    "\ufeff: comment first\r\n"
    "retry: 2500\r\n"
    "event: delta\r"
    "id: 41\n"
    "data: {\"text\": \"héllo 深度 🦀\"}\r\n"
    "data:second line\r"
    "\r\n"
    ":another comment\n"
    "data\n"
    "\r"
    "event: ping\n\n"
    "data: last 🦀\r\n\r\n"
).encode()
RICH_EVENTS = [
    ServerSentEvent(event="delta", data='{"text": "héllo 深度 🦀"}\nsecond line', id="41", retry=2500),
    ServerSentEvent(data="", id="41", retry=2500),
    ServerSentEvent(data="last 🦀", id="41", retry=2500),
]


def test_every_two_and_three_way_split_of_a_rich_body() -> None:
    # CR, LF and CRLF endings, a BOM, comments, retry/id/event fields, multi-line data and
    # characters of 2, 3 and 4 UTF-8 bytes: a read may end at any byte, inside any of them.
    size = len(RICH_BODY)
    assert decode(RICH_BODY) == RICH_EVENTS
    for first in range(size + 1):
        assert decode(RICH_BODY[:first], RICH_BODY[first:]) == RICH_EVENTS, first
        for second in range(first, size + 1, 7):
            assert decode(RICH_BODY[:first], RICH_BODY[first:second], RICH_BODY[second:]) == RICH_EVENTS


def test_byte_by_byte() -> None:
    assert decode(*(RICH_BODY[i : i + 1] for i in range(len(RICH_BODY)))) == RICH_EVENTS
