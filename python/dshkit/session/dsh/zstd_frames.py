"""Checksummed Zstandard frames, the original's compressed log container.

A compressed log is a plain concatenation of independent frames: the first holds the header
line, each later one a batch of event lines. `split_frames` walks the frame headers and block
headers (RFC 8878) without decompressing, so a frame cut short by a crash is told apart from a
corrupt one. The `zstandard` package (the `dshkit[dsh]` extra) is imported only when a
compressed log is actually read or written.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from dshkit.session.dsh.detect import ZSTD_MAGIC as MAGIC

_SKIPPABLE_LOW, _SKIPPABLE_HIGH = 0x184D2A50, 0x184D2A5F
_FCS_SIZES = (0, 2, 4, 8)
_DICT_SIZES = (0, 1, 2, 4)


class FrameScan(NamedTuple):
    """Complete frames as (start, end) byte ranges, and where an incomplete last frame starts."""

    frames: list[tuple[int, int]]
    torn_start: int | None


def zstandard_module() -> Any:
    """The `zstandard` module, or an `ImportError` naming the extra that installs it."""
    try:
        import zstandard
    except ImportError:
        raise ImportError(
            "reading or writing a compressed original-harness log (.jsonl.zstd) needs the zstandard "
            "package: pip install 'dshkit[dsh]'"
        ) from None
    return zstandard


def is_zstd(prefix: bytes) -> bool:
    """Whether bytes start with the Zstandard frame magic."""
    return prefix[:4] == MAGIC


def split_frames(buffer: bytes, where: str) -> FrameScan:
    """Locate every complete frame; `ValueError` (naming the byte) for a malformed one."""
    frames: list[tuple[int, int]] = []
    offset, size = 0, len(buffer)
    while offset < size:
        start = offset
        if size - offset < 4:
            return FrameScan(frames, start)
        magic = int.from_bytes(buffer[offset : offset + 4], "little")
        if _SKIPPABLE_LOW <= magic <= _SKIPPABLE_HIGH:
            if size - offset < 8:
                return FrameScan(frames, start)
            offset += 8 + int.from_bytes(buffer[offset + 4 : offset + 8], "little")
            if offset > size:
                return FrameScan(frames, start)
            frames.append((start, offset))
            continue
        if buffer[offset : offset + 4] != MAGIC:
            raise ValueError(f"{where}: byte {offset}: not a Zstandard frame (bad magic)")
        offset += 4
        if offset >= size:
            return FrameScan(frames, start)
        descriptor = buffer[offset]
        offset += 1
        if descriptor & 0x08:
            raise ValueError(f"{where}: byte {offset - 1}: reserved bit set in a Zstandard frame header")
        single_segment = bool(descriptor & 0x20)
        fcs_flag = descriptor >> 6
        fcs_size = _FCS_SIZES[fcs_flag] if fcs_flag or not single_segment else 1
        offset += (0 if single_segment else 1) + _DICT_SIZES[descriptor & 0x03] + fcs_size
        if offset > size:
            return FrameScan(frames, start)
        while True:
            if size - offset < 3:
                return FrameScan(frames, start)
            block = int.from_bytes(buffer[offset : offset + 3], "little")
            offset += 3
            block_type = (block >> 1) & 0x03
            if block_type == 3:
                raise ValueError(f"{where}: byte {offset - 3}: reserved Zstandard block type")
            offset += 1 if block_type == 1 else block >> 3
            if offset > size:
                return FrameScan(frames, start)
            if block & 1:
                break
        if descriptor & 0x04:
            offset += 4
            if offset > size:
                return FrameScan(frames, start)
        frames.append((start, offset))
    return FrameScan(frames, None)


_MOST_EXPANSION = 2048
"""A frame whose header claims more than this many bytes per compressed byte is streamed: a
damaged header must not make a reader allocate what it claims before the data refutes it."""


def decompress_frame(frame: bytes) -> bytes:
    """One complete frame's content (its checksum verified by zstandard).

    In one call into a buffer of the size its header gives (the original's frames carry it),
    which saves the streaming decompressor's chunks and their join (~0.7 ms on the re-open
    bench's 7.5 MB log); streamed as before when the header gives none, or when that call
    refuses the frame, so that a frame is refused or read exactly as before.
    """
    zstandard = zstandard_module()
    try:
        size = zstandard.get_frame_parameters(frame).content_size
        if size != zstandard.CONTENTSIZE_UNKNOWN and size <= _MOST_EXPANSION * len(frame):
            return zstandard.ZstdDecompressor().decompress(frame)  # type: ignore[no-any-return]
    except zstandard.ZstdError:
        pass  # refused here: streamed, to be read or refused exactly as before
    decompressor = zstandard.ZstdDecompressor().decompressobj()
    return decompressor.decompress(frame)  # type: ignore[no-any-return]


def decompress_prefix(frame: bytes) -> bytes:
    """Whatever a torn frame still yields (unchecked: no checksum is left to verify)."""
    zstandard = zstandard_module()
    try:
        return zstandard.ZstdDecompressor().decompressobj().decompress(frame)  # type: ignore[no-any-return]
    except zstandard.ZstdError:
        return b""


def compress_frame(data: bytes) -> bytes:
    """One independent, checksummed frame holding `data`."""
    zstandard = zstandard_module()
    return zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(data)  # type: ignore[no-any-return]
