"""Strings through the block-at-a-time JSON writer and parser scan (issue 15): every byte that
needs an escape, at every position of a block and around its end, in keys and values, short and
long, ASCII or not, must give the text `json.dumps` gives and read back as `json.loads` reads it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

import pytest

from dshkit import Message, create_user_message, freeze, from_json, thaw, to_json, to_json_bytes

NEEDS_ESCAPE = [chr(code) for code in range(0x20)] + ['"', "\\"]
PLAIN_NEIGHBOURS = [" ", "/", "\x7f", "é", "€", "😀"]


def reference(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def strings_around_blocks() -> list[str]:
    """One special character at every position of strings of 0 to 40 characters, and two."""
    texts = []
    for length in range(41):
        base = "".join(chr(ord("a") + index % 26) for index in range(length))
        texts.append(base)
        for at in range(length + 1):
            for special in ['"', "\\", "\n", "\x00", "\x1f", "é", "😀"]:
                texts.append(base[:at] + special + base[at:])
            texts.append(base[:at] + "\\\"" + base[at:] + "\x01")
    return texts


def test_every_escape_and_neighbour_alone_and_in_a_run() -> None:
    for character in NEEDS_ESCAPE + PLAIN_NEIGHBOURS:
        for text in (character, character * 7, character * 16, "ab" + character * 33 + "cd"):
            assert to_json(text) == reference(text)
            assert to_json_bytes(text) == reference(text).encode()
            assert from_json(reference(text)) == text


@pytest.mark.parametrize("where", ["value", "key"])
def test_specials_at_every_position_of_every_length_write_and_read_as_the_stdlib(where: str) -> None:
    for text in strings_around_blocks():
        tree = {"k": text} if where == "value" else {text: 1}
        frozen = freeze(tree)
        assert to_json(frozen) == reference(tree), repr(text)
        assert to_json(tree) == reference(tree), repr(text)
        assert thaw(from_json(reference(tree))) == json.loads(reference(tree)), repr(text)
        # Escaped with \u forms too: the parser decodes what the writer never writes.
        assert thaw(from_json(json.dumps(tree))) == tree, repr(text)


def test_empty_and_very_long_strings() -> None:
    long_plain = "plain text, no escapes; " * 20_000
    long_mixed = 'line "one"\n\tand \\ two é😀\x01' * 5_000
    for text in ("", long_plain, long_mixed):
        tree = {text: text, "list": [text, text]}
        assert to_json(freeze(tree)) == reference(tree)
        assert from_json(reference(tree)) == freeze(tree)


def test_a_string_at_the_very_end_of_the_text_is_read_whole() -> None:
    for length in range(40):
        text = "x" * length
        assert from_json(f'"{text}"') == text
        assert from_json(f'"{text}\\n"') == text + "\n"
        with pytest.raises(ValueError, match="EOF while parsing a string"):
            from_json(f'"{text}')


def test_a_control_byte_inside_a_string_is_refused_where_it_is() -> None:
    for at in range(20):
        text = '"' + "a" * at + "\x01" + 'b"'
        with pytest.raises(ValueError, match=f"control character .* at line 1 column {at + 2}$"):
            from_json(text)


def test_a_lone_surrogate_is_refused_at_any_position() -> None:
    for at in range(20):
        with pytest.raises(ValueError, match="lone surrogate"):
            to_json({"k": "a" * at + "\ud800"})  # a plain tree: `freeze` would have replaced it


def test_a_message_with_escapes_everywhere_round_trips() -> None:
    text = '"quoted" \\ back\nslash\t é😀 \x00 ' * 3
    message = create_user_message(text, source={"kind": "user", "note": text})
    assert json.loads(message.to_json())["content"][0]["text"] == text
    assert Message.from_json(message.to_json()) == message
    assert message.to_json_bytes() == message.to_json().encode()


class _DumpsWhileIterated(Mapping[str, object]):
    """A mapping (not a dict) whose iteration runs another dump on the same thread: a nested dump."""

    def __init__(self, inner: object, **items: object) -> None:
        self.items_ = items
        self.inner = inner
        self.inner_text = ""

    def __getitem__(self, key: str) -> object:
        return self.items_[key]

    def __len__(self) -> int:
        return len(self.items_)

    def __iter__(self) -> Iterator[str]:
        self.inner_text = to_json(self.inner)
        return iter(self.items_)


@pytest.mark.parametrize(
    ("outer", "inner"),
    [({"k": "plain"}, {"k": "é😀"}), ({"k": "é😀"}, {"k": "plain"}), ({"k": "€"}, {"k": "é"}), ({"k": "a"}, {"k": "b"})],
)
@pytest.mark.parametrize("lead", ["ascii", "é"])  # non-ASCII read before the nested dump, or not
def test_a_nested_dump_neither_hides_nor_invents_non_ascii_text_of_the_outer_one(lead: str, outer: dict, inner: dict) -> None:
    # `to_json` builds an ASCII str without checking when no str it read could hold more; a
    # dump run while another is in progress must not change what the outer one knows of its text.
    value = _DumpsWhileIterated(inner, **outer)
    text = to_json([lead, value, "tail"])
    expected = reference([lead, outer, "tail"])
    assert value.inner_text == reference(inner)
    assert text == expected and len(text) == len(expected) and text.encode("utf-8").decode("utf-8") == expected


def test_non_ascii_only_in_a_message_source_or_key_still_makes_a_full_str() -> None:
    message = create_user_message("plain text", source={"kind": "user", "naïve key": "x"})
    text = message.to_json()
    assert "naïve key" in text and json.loads(text)["source"] == {"kind": "user", "naïve key": "x"}
    assert to_json({"clé": 1}) == '{"clé":1}'
