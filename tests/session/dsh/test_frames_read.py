"""Reading a compressed original log at open (`dsh/zstd_frames.py`, `DshJsonlStore._load_frames`):
each frame decompressed in one call when its header gives its size, the frames' texts split as
lines without being joined; the same lines, events and refusals as the streamed, joined reading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dshkit._core import OriginalLines
from dshkit.session.dsh.jsonl_store import DshJsonlStore
from dshkit.session.dsh.zstd_frames import decompress_frame
from tests.session.dsh.test_native_read import _agent_log, _open

zstandard = pytest.importorskip("zstandard")

TEXT = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n' * 50


def streamed(frame: bytes) -> bytes | type[Exception]:
    """The frame as the streaming decompressor reads it (the reading before), or its error's type."""
    try:
        return zstandard.ZstdDecompressor().decompressobj().decompress(frame)  # type: ignore[no-any-return]
    except zstandard.ZstdError:
        return zstandard.ZstdError  # type: ignore[no-any-return]


def sized_to(frame: bytes, size: int) -> bytes:
    """`frame` with its header's one-byte content size replaced (a frame of under 256 bytes' content)."""
    assert zstandard.get_frame_parameters(frame).content_size < 256 and frame[4] & 0xC0 == 0 and frame[4] & 0x20
    return frame[:5] + bytes([size]) + frame[6:]


def test_a_frame_is_decompressed_or_refused_as_the_streaming_reading_does() -> None:
    sized = zstandard.ZstdCompressor(write_checksum=True).compress(TEXT)
    unsized = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False).compress(TEXT)
    small = zstandard.ZstdCompressor(write_checksum=True).compress(TEXT[:100])
    damaged = sized[:-1] + bytes([sized[-1] ^ 1])  # its checksum no longer holds
    frames = [sized, unsized, small, damaged, sized_to(small, 99), sized_to(small, 101), sized_to(small, 255)]
    assert zstandard.get_frame_parameters(unsized).content_size == zstandard.CONTENTSIZE_UNKNOWN
    for frame in frames:
        try:
            got: bytes | type[Exception] = decompress_frame(frame)
        except zstandard.ZstdError:
            got = zstandard.ZstdError
        assert got == streamed(frame)
    assert decompress_frame(sized) == decompress_frame(unsized) == TEXT


def _frames_log(path: Path, bodies: list[bytes], header: bytes) -> Path:
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    path.write_bytes(b"".join(compressor.compress(text) for text in [header + b"\n", *bodies]))
    return path


@pytest.mark.parametrize("cuts", [[], [0.5], [0.1, 0.1, 0.7], [0.3, 0.9]])
def test_frames_ending_inside_lines_or_empty_read_as_their_joining(tmp_path: Path, cuts: list[float]) -> None:
    log = _agent_log(8)
    plain = log.write(tmp_path / "plain.jsonl")
    header, body = plain.read_bytes().split(b"\n", 1)
    at = [int(len(body) * cut) for cut in cuts]
    bodies = [body[start:stop] for start, stop in zip([0, *at], [*at, len(body)])]  # (a repeated cut: an empty frame)
    path = _frames_log(tmp_path / "session.jsonl.zstd", bodies, header)
    store = DshJsonlStore(path)
    _header, lines = store.load("none", read_only=True)
    store.close()
    assert isinstance(lines, OriginalLines) and list(lines) == body.split(b"\n")[:-1]
    assert _open(path, read_only=True) == _open(plain, read_only=True)
    assert json.loads(header)["type"] == "session"
