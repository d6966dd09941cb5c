"""Attachments: the bytes an image or file block refers to by content address, kept beside the log.

A block that refers to an attachment carries no bytes, only their address and what is known
about them (`docs/session.md`, "Attachments"):

    {"type": "image", "attachment": {"id": "sha256:<64 hex>", "media_type": "image/png", "bytes": 69}}

(`"file"` for anything that is not an image; `name`, `width`, `height`, ... ride along). The id is
the SHA-256 of the bytes, so equal bytes are stored once and every read is checked against it.
The bytes live in the store's attachment backend (a folder beside a JSON Lines log, a table of
a SQLite or PostgreSQL database, memory for an in-memory session): a store offers one through
`SessionStore.attachment_backend()`. They are written, durably, before the event that refers to
them, so a log never refers to bytes that a crash lost. A `Session` holds its `Attachments` as a
part (`session.attachments`), made with the session.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from dshkit import FrozenDict, Message, freeze

from dshkit.session.errors import AttachmentError
from dshkit.session.events import Event
from dshkit.session.stores.attachment_folder import FolderAttachments
from dshkit.session.stores.protocol import AttachmentBackend

ID_PREFIX = "sha256:"
_INLINE_CACHE_BYTES = 64 << 20  # base64 text kept for the next request (an agent resends every image each step)
# RFC 6838 section 4.2: type "/" subtype, each a restricted-name; no parameters (they would end up
# inside a `data:` URL and an API's media type field, where `;` and `,` change what is said).
_RESTRICTED_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MEDIA_TYPE = re.compile(rf"{_RESTRICTED_NAME}/{_RESTRICTED_NAME}")


class MemoryAttachments:
    """The attachment backend of an in-memory session (and of a store that has none)."""

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}

    def save_attachment(self, digest: str, data: bytes) -> None:
        if hashlib.sha256(self._objects.get(digest, b"")).hexdigest() != digest:
            self._objects[digest] = bytes(data)

    def load_attachment(self, digest: str) -> bytes | None:
        return self._objects.get(digest)

    def attachment_location(self, digest: str) -> str:
        return "the session's memory"


def attachment_id(data: bytes) -> str:
    """The content address of `data`: ``"sha256:"`` and its hex digest."""
    return ID_PREFIX + hashlib.sha256(data).hexdigest()


def digest_of(attachment_id: str) -> str:
    """The hex digest of a well-formed id (`ValueError` otherwise)."""
    digest = attachment_id[len(ID_PREFIX):] if attachment_id.startswith(ID_PREFIX) else ""
    if len(digest) != 64 or digest.strip("0123456789abcdef"):
        raise ValueError(f"an attachment id is 'sha256:' and 64 lowercase hex digits, not {attachment_id!r}")
    return digest


def check_media_type(media_type: object) -> str:
    """`media_type` in lower case if it is a bare ``type/subtype`` (RFC 6838 names, no parameters),
    else `ValueError` saying what is wrong with it."""
    if not isinstance(media_type, str):
        raise TypeError(f"attach: media_type must be a str such as 'image/png', not {type(media_type).__name__}")
    if _MEDIA_TYPE.fullmatch(media_type) is None:
        if "/" not in media_type:
            why = "it has no '/'"
        elif re.search(r"[;,\s]", media_type):
            why = "parameters and separators (';', ',', whitespace) are not part of one"
        else:
            why = "it is not one RFC 6838 name, '/' and another (a letter or digit, then letters, digits or !#$&^_.+-)"
        raise ValueError(f"attach: media_type must be a MIME type, a bare type/subtype such as 'image/png', not {media_type!r}: {why}")
    return media_type.lower()


class Attachments:
    """A session's attachments: stored with `attach`, read back verified, inlined for requests."""

    def __init__(self, backend: AttachmentBackend | None = None) -> None:
        """Over `backend` (`None`: bytes kept in memory)."""
        self.backend: AttachmentBackend = MemoryAttachments() if backend is None else backend
        self._inlined: dict[str, str] = {}  # id -> base64 text, for the next request
        self._inlined_size = 0

    def remove_unfinished(self) -> int:
        """Delete what killed writers left half-written (a folder's ``tmp/``; a database's
        transactions leave nothing); how many files. Called when a session opens for writing."""
        backend = self.backend
        return backend.remove_unfinished() if isinstance(backend, FolderAttachments) else 0

    def attach(self, data: bytes, media_type: str, *, name: str | None = None) -> FrozenDict[Any]:
        """Store `data` durably and return the frozen block that refers to it.

        An ``image/*`` media type gives an ``image`` block, any other a ``file`` block. Bytes
        stored damaged under the same id are replaced (the backend's `save_attachment`).
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"attach: data must be bytes, not {type(data).__name__}")
        media_type = check_media_type(media_type)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"attach: name must be a str, not {type(name).__name__}")
        data = bytes(data)
        identity = attachment_id(data)
        self.backend.save_attachment(identity[len(ID_PREFIX):], data)
        reference: dict[str, Any] = {"id": identity, "media_type": media_type, "bytes": len(data)}
        if name is not None:
            reference["name"] = name
        kind = "image" if media_type.startswith("image/") else "file"
        return freeze({"type": kind, "attachment": reference})  # type: ignore[no-any-return]

    def read(self, attachment_id: str, *, referrer: str | None = None) -> bytes:
        """The stored bytes of `attachment_id`, checked against it; `AttachmentError` when missing
        or altered, naming the id, where it was looked for and `referrer` (say, ``"message <id>
        content[1]"``)."""
        digest = digest_of(attachment_id)
        data = self.backend.load_attachment(digest)
        where = self.backend.attachment_location(digest)
        of = f" (referred to by {referrer})" if referrer is not None else ""
        if data is None:
            raise AttachmentError(f"attachment {attachment_id}{of} is missing: nothing at {where}", attachment_id)
        if hashlib.sha256(data).hexdigest() != digest:
            raise AttachmentError(
                f"attachment {attachment_id}{of} is corrupt: the bytes at {where} have another SHA-256", attachment_id
            )
        return data

    def base64(self, reference: Mapping[str, Any], *, referrer: str | None = None) -> str:
        """The verified bytes of the attachment `reference` names, as base64 text."""
        identity = reference.get("id")
        if not isinstance(identity, str):
            raise ValueError(f"an attachment reference needs a str 'id', not {identity!r}")
        text = self._inlined.get(identity)
        if text is None:
            text = base64.b64encode(self.read(identity, referrer=referrer)).decode("ascii")
            if self._inlined_size + len(text) > _INLINE_CACHE_BYTES:
                self._inlined.clear()
                self._inlined_size = 0
            if len(text) <= _INLINE_CACHE_BYTES:
                self._inlined[identity] = text
                self._inlined_size += len(text)
        return text

    def inline_block(self, block: Mapping[str, Any], *, referrer: str | None = None) -> dict[str, Any]:
        """`block` with its attachment replaced by the bytes (``media_type`` and base64 ``data``)."""
        reference = block["attachment"]
        out = {key: block[key] for key in block if key != "attachment"}
        out["media_type"] = reference["media_type"]
        out["data"] = self.base64(reference, referrer=referrer)
        if "name" in reference and "name" not in out:
            out["name"] = reference["name"]
        return out


def attachment_references(message: Message) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each attachment reference of `message`'s blocks (tool results' included), with its place."""
    for index, block in enumerate(message.content):
        reference = block.get("attachment") if isinstance(block, Mapping) else None
        if isinstance(reference, Mapping):
            yield f"content[{index}]", reference
        inner = block.get("content") if isinstance(block, Mapping) and block.get("type") == "tool_result" else None
        if isinstance(inner, tuple):
            for position, part in enumerate(inner):
                reference = part.get("attachment") if isinstance(part, Mapping) else None
                if isinstance(reference, Mapping):
                    yield f"content[{index}].content[{position}]", reference


def logged_messages(events: Iterable[Event]) -> Iterator[tuple[int, Message]]:
    """Each message an event carries (a message event's, an inbox splice's), with the event's seq."""
    for event in events:
        data = event.data
        if isinstance(data, Message):
            yield event.seq, data
        elif isinstance(data, Mapping):
            for value in data.values():
                if isinstance(value, Message):
                    yield event.seq, value
                elif isinstance(value, tuple):
                    for item in value:
                        if isinstance(item, Message):
                            yield event.seq, item


def _inline_blocks(blocks: tuple[Any, ...], attachments: Attachments, where: str) -> list[Any]:
    out = []
    for index, block in enumerate(blocks):
        if isinstance(block, Mapping) and isinstance(block.get("attachment"), Mapping):
            block = attachments.inline_block(block, referrer=f"{where}[{index}]")
        elif isinstance(block, Mapping) and block.get("type") == "tool_result" and isinstance(block.get("content"), tuple):
            block = {**block, "content": _inline_blocks(block["content"], attachments, f"{where}[{index}].content")}
        out.append(block)
    return out


def inline_attachments(messages: Any, attachments: Attachments | None) -> list[Message]:
    """`messages` with every attachment block carrying its bytes inline (same ids), for formats
    that have no way to refer to stored bytes. A message without attachments is kept as it is."""
    out = []
    for message in messages:
        if isinstance(message, Message) and next(attachment_references(message), None) is not None:
            if attachments is None:
                where, reference = next(attachment_references(message))
                raise AttachmentError(
                    f"message {message.id} {where}: attachment {reference.get('id')} cannot be read: no attachments were given",
                    str(reference.get("id")),
                )
            message = message.with_content(_inline_blocks(message.content, attachments, f"message {message.id} content"))
        out.append(message)
    return out


def copy_attachments(events: Iterable[Event], source: Attachments, dest: AttachmentBackend) -> int:
    """Copy, verified, every attachment the messages of `events` refer to from `source` to `dest`
    (before the log that refers to them is published); how many ids."""
    copied: set[str] = set()
    for seq, message in logged_messages(events):
        for where, reference in attachment_references(message):
            identity = reference["id"]
            if identity not in copied:
                data = source.read(identity, referrer=f"message {message.id} {where} (event {seq})")
                dest.save_attachment(digest_of(identity), data)
                copied.add(identity)
    return len(copied)

