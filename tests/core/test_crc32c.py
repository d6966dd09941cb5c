"""`crc32c`: the CRC-32C (Castagnoli) checksum the session layer puts on stored records."""

from __future__ import annotations

import random

import pytest

from dshkit._core import crc32c

CASTAGNOLI_REVERSED = 0x82F63B78


def reference_crc32c(data: bytes) -> int:
    """Bit-at-a-time CRC-32C, straight from its definition (reflected, init and final xor ~0)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (CASTAGNOLI_REVERSED if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"", 0x00000000),
        (b"123456789", 0xE3069283),  # the catalogue check value of CRC-32C
        (b"a", 0xC1D04330),
        (bytes(32), 0x8A9136AA),  # RFC 3720 (iSCSI) B.4: 32 bytes of zeros
        (b"\xff" * 32, 0x62A8AB43),  # ... 32 bytes of ones
        (bytes(range(32)), 0x46DD794E),  # ... incrementing
        (bytes(range(31, -1, -1)), 0x113FDB5C),  # ... decrementing
    ],
)
def test_known_vectors(data: bytes, expected: int) -> None:
    assert crc32c(data) == expected
    assert reference_crc32c(data) == expected


def test_every_length_and_alignment_matches_the_definition() -> None:
    """The native code works in 8-byte words with a byte-wise head and tail: every split."""
    rng = random.Random(9)
    blob = bytes(rng.getrandbits(8) for _ in range(300))
    for start in range(9):
        for length in range(0, 140):
            chunk = blob[start : start + length]
            assert crc32c(chunk) == reference_crc32c(chunk), (start, length)


def test_a_large_buffer_matches_the_definition() -> None:
    data = random.Random(3).randbytes(100_003)
    assert crc32c(data) == reference_crc32c(data)


def test_a_str_is_checksummed_as_its_utf8() -> None:
    text = '{"seq":1,"data":"é😀中"}'
    assert crc32c(text) == crc32c(text.encode("utf-8")) == reference_crc32c(text.encode("utf-8"))
    assert crc32c("123456789") == 0xE3069283


def test_every_single_bit_flip_changes_the_checksum() -> None:
    data = bytearray(b'{"seq":7,"time":1,"type":"user/message","data":{"id":"01J"}}\n')
    original = crc32c(bytes(data))
    for index in range(len(data)):
        for bit in range(8):
            data[index] ^= 1 << bit
            assert crc32c(bytes(data)) != original
            data[index] ^= 1 << bit


def test_the_result_is_an_unsigned_32_bit_int() -> None:
    values = [crc32c(bytes([n]) * n) for n in range(256)]
    assert all(type(v) is int and 0 <= v < 2**32 for v in values)
    assert any(v >= 2**31 for v in values)


@pytest.mark.parametrize("bad", [None, 123, bytearray(b"abc"), memoryview(b"abc"), ["a"]])
def test_other_types_are_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="crc32c: data must be bytes or str"):
        crc32c(bad)  # type: ignore[arg-type]


def test_a_str_with_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        crc32c("a\ud800b")
