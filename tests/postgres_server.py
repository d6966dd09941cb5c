"""A private PostgreSQL cluster for tests and benchmarks: initdb in a temp dir, a Unix socket, trust auth.

PostgreSQL refuses to run as root, so when the tests run as root the cluster belongs to the
`postgres` system user and every server command runs through `runuser -u postgres --`. Without
the server binaries (or the psycopg driver) `start_server` raises `ServerUnavailable`, which the
fixtures turn into a skip naming what is missing (`server_or_skip`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SEARCH_DIRS = tuple(
    str(path) for path in sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: p.parent.name, reverse=True)
) or ("/usr/lib/postgresql/15/bin",)


class ServerUnavailable(Exception):
    """No PostgreSQL server can be started here (binaries, user or driver missing)."""


def _bin_dir() -> Path:
    configured = os.environ.get("DSHKIT_PG_BIN")
    for candidate in ([configured] if configured else []) + list(SEARCH_DIRS):
        if Path(candidate, "initdb").exists() and Path(candidate, "pg_ctl").exists():
            return Path(candidate)
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise ServerUnavailable(
        "PostgreSQL server binaries not found (looked in "
        f"{', '.join(SEARCH_DIRS)} and PATH): apt-get install postgresql-15, or set DSHKIT_PG_BIN"
    )


def _as_server_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    if shutil.which("runuser") is None:
        raise ServerUnavailable("running as root and `runuser` is missing: cannot start PostgreSQL unprivileged")
    return ["runuser", "-u", "postgres", "--", *argv]


def _chown_to_server_user(path: Path) -> None:
    if os.geteuid() == 0:
        import pwd

        try:
            entry = pwd.getpwnam("postgres")
        except KeyError:
            raise ServerUnavailable("running as root and there is no `postgres` user to run the server as") from None
        os.chown(path, entry.pw_uid, entry.pw_gid)


@contextmanager
def start_server(dbname: str = "dshkit_test", *, fsync: bool = False) -> Iterator[str]:
    """Start a throwaway cluster; yields a `postgresql://` URL of a fresh database on its socket.

    `fsync=False` (tests) trades crash safety of the throwaway cluster for speed; benchmarks pass True.
    """
    try:
        import psycopg  # noqa: F401 - the tests talk to the server through it
    except ImportError:
        raise ServerUnavailable("the psycopg driver is not installed (pip install 'dshkit[postgres]')") from None
    bin_dir = _bin_dir()
    root = Path(tempfile.mkdtemp(prefix="dshkit-pg-"))
    os.chmod(root, 0o755)
    data, socket_dir = root / "data", root / "socket"
    socket_dir.mkdir()
    _chown_to_server_user(root)
    _chown_to_server_user(socket_dir)

    def run(argv: list[str]) -> None:
        result = subprocess.run(_as_server_user(argv), capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr or result.stdout}")

    run([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
    options = (
        f"-k {socket_dir} -c listen_addresses='' -c fsync={'on' if fsync else 'off'} -c max_connections=200 "
        "-c shared_buffers=64MB"
    )
    run([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "server.log"), "-w", "start"])
    try:
        import psycopg

        with psycopg.connect(f"postgresql://postgres@/postgres?host={socket_dir}", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{dbname}"')
        yield f"postgresql://postgres@/{dbname}?host={socket_dir}"
    finally:
        subprocess.run(
            _as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(root, ignore_errors=True)


def server_or_skip(dbname: str = "dshkit_test", *, fsync: bool = False) -> Iterator[str]:
    """`start_server` for a pytest fixture (``yield from server_or_skip(...)``): the URL, or a skip
    naming what is missing when no server can start here."""
    server = start_server(dbname, fsync=fsync)
    try:
        url = server.__enter__()
    except ServerUnavailable as error:
        pytest.skip(f"no PostgreSQL server: {error}")
    try:
        yield url
    finally:
        server.__exit__(None, None, None)
