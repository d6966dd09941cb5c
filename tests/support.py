"""Helpers shared by the test modules (on sys.path through pytest's `pythonpath` setting)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import dshkit

DSHKIT_PATH = str(Path(dshkit.__file__).resolve().parents[1])
"""Where the dshkit under test is imported from (the source tree, or an installed wheel's
site-packages): the PYTHONPATH of a child process that must import the same build."""


class PlainMapping(Mapping[Any, Any]):
    """A minimal third-party Mapping (not a dict): what a caller's own mapping type looks like."""

    def __init__(self, data: dict[Any, Any]) -> None:
        self._data = dict(data)

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def traced_allocation(call: Callable[[], object]) -> tuple[int, int]:
    """Bytes `call()` left allocated and its peak, both above the level before it (tracemalloc)."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        call()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return after - before, peak - before


def assert_no_collection_during(decode: Callable[[], object], failing: Callable[[], object]) -> object:
    """`decode()` starts no cyclic collection but the one that was due (at most one, started by
    the first allocation after it) and sets the collector back as it found it (still off when it
    was off), and so does `failing()`, which must raise `TypeError`. What `decode()` gave."""
    import pytest

    collections: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        result = decode()
        during = list(collections)
        gc.disable()
        decode()
        assert not gc.isenabled()
        gc.enable()
        with pytest.raises(TypeError):
            failing()
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(count)
        gc.enable()
    assert len(during) <= 1, during
    return result


FNV_BASIS = 0x811C9DC5
FNV_PRIME = 0x01000193
KEY_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def fnv1a_32(data: bytes, state: int = FNV_BASIS) -> int:
    """32-bit FNV-1a of `data`, continuing from `state`."""
    for byte in data:
        state = ((state ^ byte) * FNV_PRIME) & 0xFFFFFFFF
    return state


def _fnv1a_block_pair(state: int) -> tuple[bytes, bytes, int]:
    """Two different 4-character blocks that take FNV-1a from `state` to one same state, and
    that state. Meet in the middle: two 3-character prefixes whose states differ only in the low
    7 bits (a birthday search over 25 bits) are evened out by the last character of each block,
    since FNV-1a xors that character in before its final multiplication."""
    seen: dict[int, tuple[bytes, int]] = {}
    mask, prime, alphabet = 0xFFFFFFFF, FNV_PRIME, set(KEY_ALPHABET)
    for a in KEY_ALPHABET:
        after_a = ((state ^ a) * prime) & mask
        for b in KEY_ALPHABET:
            after_b = ((after_a ^ b) * prime) & mask
            for c in KEY_ALPHABET:
                after_c = ((after_b ^ c) * prime) & mask
                other_prefix, other_state = seen.setdefault(after_c >> 7, (bytes((a, b, c)), after_c))
                low_bits = other_state ^ after_c
                if other_state == after_c:
                    continue
                for last in KEY_ALPHABET:
                    if last ^ low_bits in alphabet:
                        joined = ((other_state ^ last) * prime) & mask
                        return other_prefix + bytes((last,)), bytes((a, b, c, last ^ low_bits)), joined
    raise AssertionError("no FNV-1a collision among 4-character blocks")  # pragma: no cover


def fnv1a_colliding_keys(rounds: int) -> list[str]:
    """2**rounds distinct alphanumeric keys of 4*rounds characters sharing one 32-bit FNV-1a
    hash: a chain of block pairs that each lead to the same state, so every choice of one block
    per pair ends in the same hash."""
    keys = [b""]
    state = FNV_BASIS
    for _ in range(rounds):
        first, second, state = _fnv1a_block_pair(state)
        keys = [key + block for key in keys for block in (first, second)]
    return [key.decode("ascii") for key in keys]


def key_cache_slot(text: bytes) -> int:
    """The slot of the parser's key cache that `text` goes to (`rust/json/read/keys.rs`, `KeyWords`): its
    length and its first and last 8 bytes as little-endian words (under 8 bytes, padded with
    spaces), mixed by one multiplication, top 9 bits."""
    words = [0, 0]
    if len(text) >= 8:
        words = [int.from_bytes(text[:8], "little"), int.from_bytes(text[-8:], "little")]
    elif text:
        words = [int.from_bytes(text.ljust(8, b" "), "little"), 0]
    mask = 0xFFFFFFFFFFFFFFFF
    last = ((words[1] << 29) | (words[1] >> 35)) & mask
    mixed = ((words[0] ^ last ^ len(text)) * 0x9E3779B97F4A7C15) & mask
    return mixed >> 55


def key_cache_colliding_keys(count: int, length: int) -> list[str]:
    """`count` distinct alphanumeric texts of `length` characters that share one slot of the
    parser's key cache (`key_cache_slot`)."""
    if length > 16:
        # By construction: beyond 16 bytes the slot sees only the length and the first and last
        # 8 bytes, so texts that differ only between them share it.
        middle = length - 16
        if count > len(KEY_ALPHABET) ** middle:
            raise AssertionError("too few texts of that length")
        return [f"aaaaaaaa{_alphanumeric(n).ljust(middle, 'a')}zzzzzzzz" for n in range(count)]
    by_slot: dict[int, list[str]] = {}
    for n in range(1, 1_000_000):
        digits = _alphanumeric(n)
        if len(digits) > length:
            break
        text = digits.rjust(length, "a")
        group = by_slot.setdefault(key_cache_slot(text.encode()), [])
        if text not in group:
            group.append(text)
        if len(group) == count:
            return group
    raise AssertionError("too few texts of that length")  # pragma: no cover


def _alphanumeric(n: int) -> str:
    """`n` written in the digits of `KEY_ALPHABET` ("a" is 0), least significant first; "" for 0."""
    digits = ""
    while n:
        n, digit = divmod(n, len(KEY_ALPHABET))
        digits += chr(KEY_ALPHABET[digit])
    return digits


def child_env_without(folder: Path, *modules: str) -> dict[str, str]:
    """The environment of a child process that imports the dshkit under test but cannot import
    `modules` (nor their submodules), as on an install without their extra: a `sitecustomize` in
    `folder`, first on PYTHONPATH, puts an import blocker first on `sys.meta_path`."""
    import os

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        "import sys\n\n\n"
        "class _Missing:\n"
        f"    names = {modules!r}\n\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in self.names:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n\n\n"
        "sys.meta_path.insert(0, _Missing())\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSHKIT_")}
    env["PYTHONPATH"] = os.pathsep.join((str(folder), DSHKIT_PATH))
    return env
