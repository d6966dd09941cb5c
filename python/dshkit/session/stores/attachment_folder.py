"""Attachment bytes in a folder, one file per content address: `<root>/objects/<2 hex>/<64 hex>`.

The layout is the original harness's (`<DSH_HOME>/attachments/v1/objects/...`), so its logs open
with their images (`dshkit.session.dsh.attachment_root` says where) and a dshkit JSON Lines log
keeps its own the same way, in `attachments/` beside it (logs in one directory, forks among
them, share it). A file is written under a
temporary name in `<root>/tmp`, fsynced, and hard-linked into place, then the directories are
fsynced: an object appears complete or not at all, and an existing one is never replaced.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FolderAttachments:
    """Attachment bytes as files below `root`."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"FolderAttachments({str(self.root)!r})"

    def _path(self, digest: str) -> Path:
        return self.root / "objects" / digest[:2] / digest

    def attachment_location(self, digest: str) -> str:
        return str(self._path(digest))

    def load_attachment(self, digest: str) -> bytes | None:
        try:
            return self._path(digest).read_bytes()
        except FileNotFoundError:
            return None

    def save_attachment(self, digest: str, data: bytes) -> None:
        target = self._path(digest)
        if target.exists():
            return  # content-addressed: the same bytes (a read checks them)
        created = [path for path in (self.root, target.parent.parent, target.parent) if not path.exists()]
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.root / "tmp" / f"{digest}.{secrets.token_hex(6)}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, target)
        except FileExistsError:
            pass  # another writer published the same bytes meanwhile
        finally:
            temporary.unlink(missing_ok=True)
        for directory in (target.parent, *(path.parent for path in created)):
            _fsync_directory(directory)
