"""Attachment bytes in a folder, one file per content address: `<root>/objects/<2 hex>/<64 hex>`.

The layout is the original harness's (`<DSH_HOME>/attachments/v1/objects/...`), so its logs open
with their images (`dshkit.session.dsh.attachment_root` says where) and a dshkit JSON Lines log
keeps its own the same way, in `attachments/` beside it (logs in one directory, forks among
them, share it). A file is written under a temporary name in `<root>/tmp`, fsynced, and
hard-linked into place, then the directories are fsynced: an object appears complete or not at
all. An object whose bytes no longer match its name (damage) is replaced by the next save of
the right bytes (renamed over it: readers see the old file or the new one).

A writer holds an exclusive `flock` on its temporary file while it writes. A writer killed
meanwhile leaves the file behind, unlocked: `remove_unfinished` (run when a session opens for
writing) deletes every temporary no live writer holds. A temporary deleted between a writer's
`open` and its `flock` makes that writer's `link` fail, and it writes again.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory lock, temporaries are kept
    fcntl = None  # type: ignore[assignment]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_locked(fd: int, data: bytes) -> None:
    """Lock the new temporary `fd` (a live writer's), write all of `data` and fsync it."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


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
        try:
            stored = target.read_bytes()
        except FileNotFoundError:
            stored = None
        if stored is not None and hashlib.sha256(stored).hexdigest() == digest:
            return  # content-addressed: these very bytes
        created = [path for path in (self.root, target.parent.parent, target.parent) if not path.exists()]
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        for _attempt in range(3):  # a cleaner removed the temporary before this writer locked it: write it again
            if self._publish(target, data, heal=stored is not None):
                break
        else:
            raise OSError(f"{target}: its temporary file in {self.root / 'tmp'} kept vanishing before it was linked")
        for directory in (target.parent, *(path.parent for path in created)):
            _fsync_directory(directory)

    def _publish(self, target: Path, data: bytes, *, heal: bool) -> bool:
        """Write `data` to a temporary and put it at `target` (over damaged bytes when `heal`);
        False if the temporary vanished first (`remove_unfinished` took it for a dead writer's)."""
        temporary = self.root / "tmp" / f"{target.name}.{secrets.token_hex(6)}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o600)
        try:
            _write_locked(fd, data)
            if heal:
                os.replace(temporary, target)
            else:
                try:
                    os.link(temporary, target)
                except FileExistsError:
                    pass  # another writer published bytes meanwhile (a read checks them)
        except FileNotFoundError:
            return False
        finally:
            temporary.unlink(missing_ok=True)
            os.close(fd)
        return True

    def remove_unfinished(self) -> int:
        """Delete the temporaries of writers that died (no `flock` held on them); how many.

        Best effort: a temporary that cannot be opened or removed (permissions) is left for later.
        """
        folder = self.root / "tmp"
        try:
            names = os.listdir(folder) if fcntl is not None else []  # without locks, a live writer's looks the same
        except OSError:
            return 0  # no folder yet (nothing was ever attached here), or one this process cannot read
        removed = 0
        for name in names:
            try:
                fd = os.open(folder / name, os.O_RDONLY | _CLOEXEC)
            except OSError:
                continue  # its writer finished meanwhile, or it is not this process's to open
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.unlink(folder / name)
                removed += 1
            except OSError:
                continue  # a live writer's (BlockingIOError), or not this process's to remove
            finally:
                os.close(fd)
        return removed
