"""JSON: `to_json`, `from_json`, and the `json_default` hook for `json` and `orjson`."""

from __future__ import annotations

import json
import math
import struct
import sys
import types
from typing import Any

import orjson
import pytest

from support import PlainMapping, fnv1a_32, fnv1a_colliding_keys, key_cache_colliding_keys, key_cache_slot
from dshkit import (
    FrozenDict,
    Message,
    create_assistant_message,
    create_user_message,
    freeze,
    from_json,
    json_default,
    thaw,
    to_json,
)

USER = {"kind": "user"}


def bits(value: float) -> bytes:
    return struct.pack("<d", value)


SAMPLE = {"a": [1, 2.5, True, False, None, "s"], "b": {"c": {"d": []}}, "e": {}}


# --- to_json ---------------------------------------------------------------------------------


def test_to_json_is_compact() -> None:
    assert to_json(freeze(SAMPLE)) == '{"a":[1,2.5,true,false,null,"s"],"b":{"c":{"d":[]}},"e":{}}'


@pytest.mark.parametrize(
    "value",
    [SAMPLE, freeze(SAMPLE), types.MappingProxyType(SAMPLE), PlainMapping(SAMPLE)],
    ids=["plain", "frozen", "mappingproxy", "custom-mapping"],
)
def test_to_json_accepts_frozen_and_plain_trees(value: Any) -> None:
    assert json.loads(to_json(value)) == SAMPLE
    assert to_json(value) == to_json(freeze(SAMPLE))


@pytest.mark.parametrize(
    ("leaf", "text"),
    [(None, "null"), (True, "true"), (False, "false"), (0, "0"), (-7, "-7"), (2**63 - 1, str(2**63 - 1)),
     (-(2**63), str(-(2**63))), ("", '""'), ("x", '"x"'), ((), "[]"), ([], "[]"), ({}, "{}")],
)
def test_to_json_of_leaves(leaf: Any, text: str) -> None:
    assert to_json(leaf) == text


class Count(int):
    pass


# Around CPython's one-digit ints (below 2**30 in magnitude), which the writer reads from the object.
INT_EDGES = [0, 1, -1, 9, 10, -10, 99, 100, 12345, 2**30 - 1, -(2**30 - 1), 2**30, -(2**30), 2**31, -(2**31),
             2**32 + 1, 10**17, 2**63 - 1, -(2**63), -(2**63) + 1]


@pytest.mark.parametrize("number", INT_EDGES)
def test_ints_are_written_exactly_in_every_position(number: int) -> None:
    text = str(number)
    assert to_json(number) == text
    assert to_json([number, -number if number > -(2**63) else 0]) == f"[{text},{-number if number > -(2**63) else 0}]"
    assert to_json(freeze({"n": number, "in": (number,)})) == f'{{"n":{text},"in":[{text}]}}'
    assert to_json(Count(number)) == text  # a subclass is read through the C API


def test_to_json_keeps_bool_distinct_from_int() -> None:
    assert to_json([1, True, 0, False]) == "[1,true,0,false]"


def test_to_json_of_a_message_matches_its_method() -> None:
    message = create_assistant_message(
        [{"type": "text", "text": "a"}], provider="p", model="m", replay_state={"x": [1.5]}
    )
    assert to_json(message) == message.to_json()
    assert json.loads(to_json(message)) == message.to_dict()


@pytest.mark.parametrize(
    "text",
    [
        "plain",
        'quote " and backslash \\ and slash /',
        "\x00\x01\x02\x07\x08\t\n\x0b\x0c\r\x0e\x1f",
        "\x7f\x80\x9f",
        "é ü ß ñ",
        "漢字かなカナ",
        "😀 𝄞 \U0010ffff",
        "\u2028\u2029",
        "\ufeff bom",
        "".join(chr(c) for c in range(0x20)),
    ],
    ids=["plain", "quotes", "controls", "c1", "latin", "cjk", "astral", "separators", "bom", "all-controls"],
)
def test_string_escaping_round_trips(text: str) -> None:
    encoded = to_json({text: [text]})
    assert json.loads(encoded) == {text: [text]}
    assert orjson.loads(encoded) == {text: [text]}
    assert from_json(encoded) == {text: (text,)}
    # Control characters never appear raw in the output.
    assert not any(ord(c) < 0x20 for c in encoded)


def test_string_escapes_are_the_short_forms_where_json_has_them() -> None:
    assert to_json("\"\\\n\r\t\b\f") == '"\\"\\\\\\n\\r\\t\\b\\f"'
    assert to_json("\x00\x1f") == '"\\u0000\\u001f"'


def test_non_ascii_is_written_as_utf8_not_escaped() -> None:
    """Pinned: like orjson, text is UTF-8 rather than \\u escapes."""
    assert to_json("é😀") == '"é😀"'


@pytest.mark.parametrize(
    "value",
    [0.0, -0.0, 0.1, 1.0, -1.5, 1e16, 1e22, 1e23, 1e-7, 5e-324, 2.2250738585072014e-308,
     sys.float_info.max, -sys.float_info.max, 1 / 3, 9007199254740993.0, 123456789.123456789],
)
def test_floats_round_trip_exactly(value: float) -> None:
    encoded = to_json([value])
    assert bits(json.loads(encoded)[0]) == bits(value)
    assert bits(from_json(encoded)[0]) == bits(value)
    assert type(from_json(encoded)[0]) is float


def test_whole_floats_stay_floats() -> None:
    assert type(json.loads(to_json(1.0))) is float
    assert type(from_json(to_json(1.0))) is float
    assert type(from_json(to_json(1e20))) is float


@pytest.mark.parametrize(
    ("value", "error", "prefix"),
    [
        ({"a": [1, {2}]}, TypeError, "value['a'][1]: set is not a JSON value"),
        ({"a": b"x"}, TypeError, "value['a']: bytes is not a JSON value"),
        ({"a": float("nan")}, ValueError, "value['a']: "),
        ({"a": [float("inf")]}, ValueError, "value['a'][0]: "),
        ({"a": 2**63}, ValueError, "value['a']: "),
        ({"a": -(2**63) - 1}, ValueError, "value['a']: "),
        ({"a": {"b": {1: 2}}}, TypeError, "value['a']['b']: "),
    ],
)
def test_to_json_bad_values_name_the_path(value: Any, error: type[Exception], prefix: str) -> None:
    with pytest.raises(error) as caught:
        to_json(value)
    assert str(caught.value).startswith(prefix), str(caught.value)


def _nested(levels: int) -> Any:
    value: Any = 0
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


@pytest.mark.parametrize("prepare", [lambda v: v, freeze], ids=["plain", "frozen"])
def test_to_json_depth_limit(prepare: Any) -> None:
    text = to_json(prepare(_nested(256)))
    assert json.loads(text) == _nested(256)
    with pytest.raises(ValueError, match="256"):
        to_json(_nested(257))


def test_to_json_refuses_cycles() -> None:
    loop: dict[str, Any] = {}
    loop["again"] = [loop]
    with pytest.raises(ValueError, match="cycle"):
        to_json(loop)


@pytest.mark.parametrize("surrogate", ["\ud800", "\udfff", "a\udc80b"])
def test_lone_surrogates_raise_value_error_naming_the_path(surrogate: str) -> None:
    with pytest.raises(ValueError) as caught:
        to_json({"a": ["ok", surrogate]})
    assert str(caught.value).startswith("value['a'][1]: ")
    assert "surrogate" in str(caught.value)


def test_a_lone_surrogate_in_a_key_is_refused() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        to_json({"k\ud800": 1})


def test_a_lone_surrogate_in_a_message_is_replaced_so_it_can_always_be_written() -> None:
    """Pinned: freezing replaces each lone surrogate (text with no UTF-8 form, such as a file name
    `os.listdir` decoded with surrogateescape) by U+FFFD, in values and keys; plain trees that
    were never frozen are still refused by the writer, naming the path."""
    message = create_user_message("bad \ud800 name-\udcff", source={**USER, "k\udc80": ["\udfff"]})
    assert message.text == "bad \ufffd name-\ufffd" and message.source["k\ufffd"] == ("\ufffd",)
    assert Message.from_json(message.to_json()) == message
    assert freeze("caf\xe9 \U0001f600 \ud83d\ude00") == "caf\xe9 \U0001f600 \ufffd\ufffd"  # a pair of halves is two lone ones
    assert freeze({"a\udcff": 1, "a\udcfe": 2}) == {"a\ufffd": 2}  # keys that differ only there: the last wins, as dict does
    for wide in ("\u4e2d" * 100, "\U0001f600" * 70):  # 2- and 4-byte text, past the first block scanned
        assert freeze(wide + "\udfff" + wide) == wide + "\ufffd" + wide
    plain = "no surrogate \u4e2d"
    assert freeze(plain) is plain


# --- from_json -------------------------------------------------------------------------------


def test_from_json_builds_a_frozen_tree() -> None:
    value = from_json('{"a":[1,{"b":[2.5,null,true]}],"c":"x"}')
    assert type(value) is FrozenDict
    assert type(value["a"]) is tuple and type(value["a"][1]) is FrozenDict
    assert value == freeze({"a": [1, {"b": [2.5, None, True]}], "c": "x"})
    assert value["a"][1]["b"][2] is True
    assert freeze(value) is value


def test_from_json_accepts_str_and_bytes_and_whitespace() -> None:
    assert from_json(' \n{ "a" : [ 1 , 2 ] }\t') == {"a": (1, 2)}
    assert from_json(b'{"a":1}') == {"a": 1}
    assert from_json('"\\u00e9\\ud83d\\ude00"') == "é😀"


def test_from_json_keeps_key_order_and_last_duplicate_wins() -> None:
    """Pinned to `json.loads`: a repeated key keeps its first position and its last value."""
    text = '{"z":1,"a":2,"z":3}'
    value = from_json(text)
    assert list(value.items()) == list(json.loads(text).items())


@pytest.mark.parametrize("keys", [3, 16, 17, 40])
def test_from_json_repeated_keys_in_objects_of_any_size(keys: int) -> None:
    """Small objects find a repeated key by scanning, large ones by a hash table: same result."""
    members = [f'"k{i}":{i}' for i in range(keys)] + ['"k0":"again"', f'"k{keys - 1}":"last"', '"k1":{"k1":1,"k1":2}']
    text = "{" + ",".join(members) + "}"
    value = from_json(text)
    assert list(value.items()) == list(json.loads(text).items())
    assert thaw(value) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    ["", "{", "[1,]", '{"a":1,}', "nul", "NaN", "Infinity", "-Infinity", "[1] [2]", "{'a': 1}", '"\\x"', "01",
     '"unterminated', '{"a" 1}', "\ufeff{}"],
)
def test_from_json_rejects_invalid_json_with_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        from_json(text)


@pytest.mark.parametrize(
    "text",
    ["9223372036854775808", "18446744073709551616", "-9223372036854775809", "100000000000000000000000000"],
)
def test_from_json_refuses_integers_outside_64_bits(text: str) -> None:
    """Ints are 64-bit signed everywhere; a huge literal must not silently become a float."""
    with pytest.raises(ValueError):
        from_json(text)


@pytest.mark.parametrize("text", ["9223372036854775807", "-9223372036854775808", "0", "-0"])
def test_from_json_reads_64_bit_integers_exactly(text: str) -> None:
    value = from_json(text)
    assert type(value) is int and value == int(text)


@pytest.mark.parametrize("text", ["1e400", "-1e400"])
def test_from_json_refuses_floats_that_overflow(text: str) -> None:
    with pytest.raises(ValueError):
        from_json(text)


def test_from_json_lone_surrogate_escape_is_refused() -> None:
    with pytest.raises(ValueError):
        from_json('"\\ud800"')


# serde_json's `arbitrary_precision` passed numbers around as a one-entry map under this key.
NUMBER_MARKER = "$serde_json::private::Number"


@pytest.mark.parametrize(
    "text",
    [
        '{"$serde_json::private::Number":"+12"}',
        '{"$serde_json::private::Number":"42"}',
        '{"$serde_json::private::Number":12}',
        '{"$serde_json::private::Number":"7","x":1}',
        '{"x":1,"$serde_json::private::Number":"7"}',
        '{"turn":1,"meta":{"$serde_json::private::Number":"42"}}',
        '[{"$serde_json::private::Number":"1.5"},{"$serde_json::private::Number":{"a":[]}}]',
        '{"$serde_json::private::Numbe\\u0072":"3"}',
        '{"$serde_json::private::Number":"x","$serde_json::private::Number":"9"}',
        '{"$serde_json::private::RawValue":"1"}',
    ],
)
def test_a_key_that_was_a_parser_marker_is_data(text: str) -> None:
    """Issue 9: any key is data, whatever its text."""
    value = from_json(text)
    assert thaw(value) == json.loads(text)
    assert from_json(to_json(value)) == value
    assert from_json(text.encode()) == value


def test_the_marker_key_alone_gives_a_mapping_not_a_number() -> None:
    value = from_json('{"$serde_json::private::Number":"+12"}')
    assert type(value) is FrozenDict
    assert list(value.items()) == [(NUMBER_MARKER, "+12")]


def test_a_content_block_with_the_marker_key_round_trips_through_message_json() -> None:
    message = create_user_message([{NUMBER_MARKER: "7", "type": "custom", "x": 1}], source=USER)
    again = Message.from_json(message.to_json())
    assert again == message
    assert again.content[0][NUMBER_MARKER] == "7"


@pytest.mark.parametrize(
    "text, expected",
    [("1", 1), ("1.0", 1.0), ("-0", 0), ("-0.0", -0.0), ("1e2", 100.0), ("1E+2", 100.0), ("2.5e-3", 0.0025),
     ("0.1", 0.1), ("9007199254740993", 9007199254740993), ("9007199254740993.0", 9007199254740992.0),
     ("2.2250738585072011e-308", 2.2250738585072011e-308), ("1e-400", 0.0),
     ("123456789012345678901234567890e-10", 12345678901234567890.1234567890)],
)
def test_from_json_numbers_keep_int_and_float_apart_and_are_exact(text: str, expected: float) -> None:
    value = from_json(text)
    assert type(value) is type(expected) and value == expected
    assert bits(float(value)) == bits(float(expected)) or type(value) is int
    assert value == json.loads(text) and type(value) is type(json.loads(text))


@pytest.mark.parametrize("text", ["-", "1.", ".5", "1e", "1e+", "+1", "0x10", "1.e5", "--1", "-01", "00"])
def test_from_json_refuses_malformed_numbers(text: str) -> None:
    with pytest.raises(ValueError, match="invalid JSON"):
        from_json(text)


@pytest.mark.parametrize(
    "text, where",
    [('{"a":1,}', "line 1 column 8"), ('[1,\n2,]', "line 2 column 3"), ('{"a" 1}', "line 1 column 6"),
     ("[1] x", "line 1 column 5"), ('"a\x01"', "line 1 column 3"), ('"\\ud800"', "line 1 column")],
)
def test_from_json_errors_name_line_and_column(text: str, where: str) -> None:
    with pytest.raises(ValueError, match="invalid JSON") as caught:
        from_json(text)
    assert where in str(caught.value)


def test_from_json_decodes_every_escape_and_keeps_raw_utf8() -> None:
    text = '{"k\\n\\u00e9":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u0001\\ud83d\\ude00 \u00e9\u4e2d\U0001f600 plain run longer than eight"}'
    assert thaw(from_json(text)) == json.loads(text)


def test_from_json_strings_of_every_length_around_the_word_scan() -> None:
    """The string scanner reads 8 bytes at a time: a stop byte in every lane and at every length."""
    for length in range(0, 25):
        for stop in ['"', "\\", "\n", "\u00e9"]:
            for at in range(length + 1):
                plain = "x" * length
                text = plain[:at] + stop + plain[at:]
                encoded = json.dumps({text: [text]}, ensure_ascii=False)
                assert thaw(from_json(encoded)) == {text: [text]}, encoded


@pytest.mark.parametrize("rounds", [3, 8, 10])
def test_keys_sharing_one_fnv1a_hash_are_kept_apart_and_repeats_still_found(rounds: int) -> None:
    """Issue 9: keys chosen to collide under the parser's key hash of the time (32-bit FNV-1a)
    once made `from_json` quadratic; kept as an input shaped like an attack now that neither the
    repeated-key table (Python's keyed str hash) nor the key cache (its own slot function,
    collided on purpose below) uses FNV-1a. Distinct keys stay distinct and a repeated key keeps
    its first position and its last value. 8 rounds give keys of 32 characters (the longest the
    key cache holds), 10 rounds keys it does not cache."""
    keys = fnv1a_colliding_keys(rounds)
    assert len(set(keys)) == len(keys) == 2**rounds
    assert len({fnv1a_32(key.encode()) for key in keys}) == 1
    members = [f'"{key}":{i}' for i, key in enumerate(keys)]
    members += [f'"{key}":"again {i}"' for i, key in enumerate(keys) if i % 3 == 0]
    text = "{" + ",".join(members) + "}"
    value = from_json(text)
    assert list(value.items()) == list(json.loads(text).items())
    assert len(value) == len(keys)
    assert all(value[key] == (f"again {i}" if i % 3 == 0 else i) for i, key in enumerate(keys))
    assert [from_json(text)[key] for key in keys] == [value[key] for key in keys]  # through the key cache again


SHORT_VALUES = [
    "",
    "a",
    "text",
    "tool_call",
    "sixteen_bytes_ab",  # the longest string value the parser's cache holds
    "seventeen_bytes_a",  # the shortest it does not
    "é",
    "€uro",
    "😀",
    "tab\there",
    'quote"d',
    "back\\slash",
    "nul\x00",
    "\x1f",
    "\U0001f600x",
    "\u2028",
]


@pytest.mark.parametrize("value", SHORT_VALUES)
def test_from_json_short_string_values_read_as_json_loads_reads_them(value: str) -> None:
    """Short string values come from the parser's key cache (issue 15): escaped, non-ASCII or
    plain, as a value, as a key and as both, in every place they occur, escaped for the text
    as `json.dumps` escapes (`\\u` escapes, surrogate pairs included) or not."""
    for text in (
        json.dumps({"k": value, "l": [value, {value: value}], value: "x"}),
        json.dumps({"k": value, "l": [value, {value: value}], value: "x"}, ensure_ascii=False),
    ):
        for _ in range(2):  # the second time from the cache
            parsed = from_json(text)
            assert thaw(parsed) == json.loads(text)
            assert type(parsed["k"]) is str
            assert parsed["l"][0] == value and len(parsed["l"][0]) == len(value)


def test_key_cache_slot_matches_the_native_reference_vectors() -> None:
    """`support.key_cache_slot` is the native slot function (`rust/json/read/keys.rs` pins the same)."""
    for text, slot in [("", 0), ("a", 13), ("text", 294), ("tool_call", 190), ("sixteen_bytes_ab", 191),
                       ("seventeen_bytes_a", 172), ("x" * 32, 307)]:
        assert key_cache_slot(text.encode()) == slot


@pytest.mark.parametrize("length", [2, 3, 7, 8, 9, 12, 15, 16, 17, 24, 32, 33])
def test_from_json_strings_sharing_a_key_cache_slot_stay_distinct(length: int) -> None:
    """Keys and short values chosen to share one slot of the parser's key cache (its own slot
    function: length, first and last 8 bytes) each read back as themselves, in turn and
    interleaved; over 16 bytes they are texts whose first and last 8 bytes are the same."""
    texts = key_cache_colliding_keys(4, length)
    assert len(set(texts)) == len(texts) == 4 and all(len(text) == length for text in texts)
    assert len({key_cache_slot(text.encode()) for text in texts}) == 1
    if length > 16:
        assert len({(text[:8], text[-8:]) for text in texts}) == 1
    text = json.dumps([[value, {value: value, "k": [value]}] for value in texts + texts[::-1] + texts])
    for _ in range(2):
        assert thaw(from_json(text)) == json.loads(text)
    as_keys = json.dumps({key: i for i, key in enumerate(texts)})
    assert list(from_json(as_keys).items()) == list(json.loads(as_keys).items())


def test_from_json_lone_surrogate_escapes_in_short_values_are_refused() -> None:
    for text in ['"\\ud800"', '"\\udc00"', '["\\ud800x"]', '{"k":"\\ud83dA"}']:
        with pytest.raises(ValueError, match="surrogate"):
            from_json(text)


def test_from_json_depth_limit() -> None:
    assert from_json("[" * 256 + "]" * 256) is not None
    with pytest.raises(ValueError, match="256"):
        from_json("[" * 257 + "]" * 257)
    with pytest.raises(ValueError):
        from_json('{"a":' * 300 + "1" + "}" * 300)
    with pytest.raises(ValueError):
        from_json("[" * 100_000)


@pytest.mark.parametrize("bad", [123, None, ["{}"], bytearray(b"{}")])
def test_from_json_refuses_non_text(bad: Any) -> None:
    with pytest.raises(TypeError):
        from_json(bad)


def test_from_json_refuses_invalid_utf8_bytes() -> None:
    with pytest.raises(ValueError):
        from_json(b'"\xff"')


# --- json_default ----------------------------------------------------------------------------


def test_stdlib_json_refuses_frozendict_without_the_hook() -> None:
    with pytest.raises(TypeError):
        json.dumps(freeze(SAMPLE))


def test_json_dumps_with_the_hook() -> None:
    frozen = freeze(SAMPLE)
    assert json.dumps(frozen, default=json_default) == json.dumps(SAMPLE)
    assert json.loads(json.dumps({"wrapped": frozen}, default=json_default)) == {"wrapped": SAMPLE}


def test_orjson_dumps_with_the_hook() -> None:
    frozen = freeze(SAMPLE)
    with pytest.raises(TypeError):
        orjson.dumps(frozen)
    assert orjson.dumps(frozen, default=json_default) == orjson.dumps(SAMPLE)
    assert orjson.loads(orjson.dumps([frozen, {"x": frozen}], default=json_default)) == [SAMPLE, {"x": SAMPLE}]


def test_the_hook_serialises_messages() -> None:
    message = create_user_message([{"type": "custom", "n": [1, {"k": None}]}], source=USER)
    assert json.loads(json.dumps(message, default=json_default)) == message.to_dict()
    assert orjson.loads(orjson.dumps(message, default=json_default)) == message.to_dict()
    assert json.loads(json.dumps([message], default=json_default)) == [message.to_dict()]


def test_the_hook_agrees_with_to_json() -> None:
    frozen = freeze(SAMPLE)
    assert json.dumps(frozen, default=json_default, separators=(",", ":")) == to_json(frozen)
    assert orjson.dumps(frozen, default=json_default).decode() == to_json(frozen)


@pytest.mark.parametrize("other", [object(), {1, 2}, b"x", 1 + 1j])
def test_the_hook_refuses_other_objects_with_type_error(other: Any) -> None:
    with pytest.raises(TypeError):
        json_default(other)
    with pytest.raises(TypeError):
        json.dumps({"x": other}, default=json_default)


def test_the_hook_does_not_expose_internal_state() -> None:
    frozen = FrozenDict({"a": 1})
    handed_out = json_default(frozen)
    if isinstance(handed_out, dict):
        handed_out["a"] = "changed"
    assert frozen == {"a": 1}


def test_json_loads_of_to_json_matches_json_dumps_semantics() -> None:
    tree = {"n": [0, -1, 2**53 + 1, 1.25, -0.0, 1e300], "s": "é\n\"", "t": [True, None], "o": {"": ""}}
    ours = json.loads(to_json(freeze(tree)))
    theirs = json.loads(json.dumps(tree))
    assert ours == theirs
    assert math.copysign(1, ours["n"][4]) == -1
