"""`dshkit log serve` answers only requests addressed to itself: a web page that rebinds its own DNS
name to this machine (DNS rebinding) gets 403, never the log; each run listens on a free port."""

from __future__ import annotations

import http.client
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import child_env_without

import dshkit
from dshkit.cli.viewer.serve import allowed_hosts, make_server
from dshkit.session import Session

SECRET = "the API key is sk-not-for-other-sites"


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "live.jsonl"
    with Session.create(path) as session:
        session.append("user/message", dshkit.create_user_message(SECRET, source={"kind": "user"}))
    return path


@pytest.fixture
def port(log: Path) -> Iterator[int]:
    server = make_server(str(log), None, host="127.0.0.1", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join()


def request(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    """GET `path` from 127.0.0.1:`port` with `host` as the Host header (None: no Host header at all)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest("GET", path, skip_host=True)
        if host is not None:
            connection.putheader("Host", host)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


@pytest.mark.parametrize("path", ["/", "/data", "/data?since=0"])
@pytest.mark.parametrize("forged", ["attacker.example:{port}", "attacker.example", "127.0.0.1.nip.io:{port}", "127.0.0.1:1", None])
def test_a_request_naming_another_host_gets_403_and_none_of_the_log(port: int, path: str, forged: str | None) -> None:
    status, body = request(port, path, None if forged is None else forged.format(port=port))
    assert status == 403
    assert SECRET.encode() not in body


@pytest.mark.parametrize("own", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}", "[::1]:{port}"])
def test_the_servers_own_address_gets_the_page_and_its_data(port: int, own: str) -> None:
    for path in ("/", "/data?since=0"):
        status, body = request(port, path, own.format(port=port))
        assert status == 200 and SECRET.encode() in body


@pytest.mark.parametrize("path", ["/favicon.ico", "/data/", "/index.html", "/../live.jsonl", "/live.jsonl"])
def test_nothing_but_the_page_and_its_data_is_served(port: int, path: str) -> None:
    status, body = request(port, path, f"127.0.0.1:{port}")
    assert status == 404 and SECRET.encode() not in body


def test_bound_to_every_interface_an_address_is_accepted_but_no_name() -> None:
    allowed = allowed_hosts(("0.0.0.0", "0.0.0.0"), 9000)
    assert allowed("192.168.1.20:9000") and allowed("127.0.0.1:9000")
    assert not allowed("attacker.example:9000") and not allowed("192.168.1.20:9001")


def test_without_port_each_run_listens_on_a_free_port_and_prints_it(log: Path, tmp_path: Path) -> None:
    env = child_env_without(tmp_path / "site")
    runs = [
        subprocess.Popen([sys.executable, "-m", "dshkit", "log", "serve", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    try:
        ports = []
        for run in runs:
            assert run.stdout is not None
            line = run.stdout.readline()  # "serving LOG at http://127.0.0.1:PORT/ (Ctrl-C stops)"
            assert line.startswith(f"serving {log} at http://127.0.0.1:"), (line, run.stderr.read() if run.stderr else "")
            ports.append(int(line.split("http://127.0.0.1:")[1].split("/")[0]))
        assert ports[0] != ports[1]  # two runs at once: each has its own port (a fixed default would collide)
        for port in ports:
            assert request(port, "/", f"127.0.0.1:{port}")[0] == 200
    finally:
        for run in runs:
            run.terminate()
            run.communicate(timeout=30)
