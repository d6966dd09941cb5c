"""The server-sent events decoder: line endings, fields, dispatch, split reads, bad bytes."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dshkit.models.http.sse import SSEDecodeError, SSEDecoder, SSEEventTooLargeError, ServerSentEvent


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


# --- linear time and bounded size (issue 9) ------------------------------------------------------

PIECE = b"x" * (64 * 1024)


def test_a_read_into_a_long_line_copies_nothing_already_pending() -> None:
    # The work per read must not grow with what is already pending: a decoder that re-joins (or
    # re-scans) the unterminated line on every read is quadratic in its length. Counted as bytes
    # allocated while 16 more reads arrive after 8 MiB of one line: a re-join allocates >= 8 MiB.
    decoder = SSEDecoder(max_event_bytes=64 * 1024 * 1024)
    decoder.feed(b"data: ")
    for _ in range(128):
        decoder.feed(PIECE)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(16):
            assert decoder.feed(PIECE) == []
        allocated = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert allocated < len(PIECE), allocated
    events = decoder.feed(b"\n\n")
    assert len(events) == 1 and len(events[0].data) == 144 * len(PIECE) and set(events[0].data) == {"x"}


@pytest.mark.slow
def test_a_64_mib_line_in_64_kib_reads_decodes_whole() -> None:
    # Quadratic decoding took ~20 s for this on a quiet machine; linear takes well under one.
    decoder = SSEDecoder(max_event_bytes=65 * 1024 * 1024)
    decoder.feed(b"event: big\ndata: ")
    for _ in range(1024):
        assert decoder.feed(PIECE) == []
    (event,) = decoder.feed(b"\r\n\r\n")
    assert event.event == "big" and len(event.data) == 64 * 1024 * 1024


def test_a_line_past_the_limit_fails_before_it_ends() -> None:
    decoder = SSEDecoder(max_event_bytes=1000)
    decoder.feed(b"data: ")
    reads = 0
    with pytest.raises(SSEEventTooLargeError, match=r"limit of 1000 bytes \(max_event_bytes\)") as caught:
        for reads in range(1, 1000):
            decoder.feed(b"y" * 100)
    assert reads == 10 and caught.value.limit == 1000 and caught.value.offset == 1006
    assert isinstance(caught.value, SSEDecodeError)


def test_the_limit_counts_every_line_of_one_event() -> None:
    # An event's size: its lines with their line endings (a CRLF counts one), up to the blank line.
    body = b"event: e\r\ndata: abc\r\n: note\r\n\r\n"  # 9 + 10 + 7 = 26 bytes
    assert decode_with_limit(26, body) == [ServerSentEvent(event="e", data="abc")]
    with pytest.raises(SSEEventTooLargeError):
        decode_with_limit(25, body)
    with pytest.raises(SSEEventTooLargeError):
        decode_with_limit(25, *(body[i : i + 1] for i in range(len(body))))


def test_the_limit_is_per_event() -> None:
    body = b"".join(b"data: %04d\n\n" % i for i in range(1000))  # 1000 events of 11 bytes
    assert len(decode_with_limit(11, body)) == 1000
    assert len(decode_with_limit(11, *(body[i : i + 7] for i in range(0, len(body), 7)))) == 1000


def test_many_small_lines_past_the_limit_fail_in_one_read_and_in_many() -> None:
    body = b"data: 12345\n" * 100 + b"\n"
    with pytest.raises(SSEEventTooLargeError):
        decode_with_limit(1000, body)
    with pytest.raises(SSEEventTooLargeError):
        decode_with_limit(1000, *(body[i : i + 5] for i in range(0, len(body), 5)))
    assert decode_with_limit(1200, body) == [ServerSentEvent(data="\n".join(["12345"] * 100))]


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, None, "16"])
def test_a_bad_limit_is_refused(limit: object) -> None:
    with pytest.raises(ValueError, match="SSEDecoder max_event_bytes: expected an int >= 1"):
        SSEDecoder(max_event_bytes=limit)  # type: ignore[arg-type]


def test_invalid_utf8_in_a_line_of_many_reads_names_its_offset() -> None:
    decoder = SSEDecoder()
    with pytest.raises(SSEDecodeError, match=r"invalid byte at offset 19"):
        for read in (b"data: ok\n\n", b"data: ab", b"c\xff", b"d\r", b"\n"):
            decoder.feed(read)


def test_a_byte_order_mark_alone_on_the_first_line_is_a_blank_line() -> None:
    assert decode(b"\xef\xbb\xbf\ndata: x\n\n") == [ServerSentEvent(data="x")]
    assert decode(b"\xef\xbb", b"\xbf", b"\n", b"data: x\n\n") == [ServerSentEvent(data="x")]


def decode_with_limit(limit: int, *reads: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder(max_event_bytes=limit)
    events = [event for read in reads for event in decoder.feed(read)]
    return events + decoder.close()


@given(
    events=events_strategy,
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    limit=st.integers(min_value=1, max_value=120),
)
def test_any_split_gives_the_same_events_or_the_same_size_error(
    events: list[list[str]], cuts: list[int], newline: str, limit: int
) -> None:
    body = "".join("".join(f"data: {line}{newline}" for line in lines) + newline for lines in events).encode()
    sizes = [sum(len(f"data: {line}".encode()) + 1 for line in lines) for lines in events]
    points = sorted({min(cut, len(body)) for cut in cuts})
    reads = [body[start:end] for start, end in zip([0, *points], [*points, len(body)])]
    if all(size <= limit for size in sizes):
        assert decode_with_limit(limit, *reads) == [ServerSentEvent(data="\n".join(lines)) for lines in events]
    else:
        with pytest.raises(SSEEventTooLargeError):
            decode_with_limit(limit, *reads)
