"""A real headless Chromium for tests and benches, driven over the DevTools protocol on loopback.

`Browser.start` launches the system's Chromium (Debian's `chromium` package) with a private profile
and a debugging port chosen by the browser; `Page` sends protocol commands over one websocket:
navigate, evaluate JavaScript, click and type with real input events, take screenshots.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

VIEWER_READY = "document.body && document.body.dataset.ready === '1'"
"""True in a `dshkit log html` page once its first rows are on screen."""

BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium_binary() -> str | None:
    """The path of a Chromium on PATH (or named by DSHKIT_CHROMIUM), or None."""
    named = os.environ.get("DSHKIT_CHROMIUM")
    if named:
        return named
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _drain(stream: IO[bytes]) -> None:
    for _ in stream:
        pass


class ProtocolError(RuntimeError):
    """A DevTools command failed, or the page threw."""


class Page:
    """One page target of the browser, over its own websocket."""

    def __init__(self, websocket_url: str) -> None:
        from websockets.sync.client import connect

        self._socket = connect(websocket_url, max_size=None, open_timeout=30)
        self._next_id = 0

    def send(self, method: str, params: dict[str, Any] | None = None, *, timeout: float = 60) -> dict[str, Any]:
        """Send one command and return its result (events arriving meanwhile are dropped)."""
        self._next_id += 1
        command_id = self._next_id
        self._socket.send(json.dumps({"id": command_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self._socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == command_id:
                if "error" in message:
                    raise ProtocolError(f"{method}: {message['error']}")
                return message.get("result", {})  # type: ignore[no-any-return]

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited if it is a promise)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise ProtocolError(f"{expression!r} threw: {details.get('exception', {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, *, timeout: float = 30) -> Any:
        """Poll `expression` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page never made {expression!r} true")
            time.sleep(0.05)

    def open(self, url: str, *, ready: str = "document.readyState === 'complete'", timeout: float = 60) -> None:
        """Navigate to `url` and wait until `ready` holds in the new document."""
        self.send("Page.enable")
        self.send("Page.navigate", {"url": url})
        self.wait_for(f"location.href === {json.dumps(url)} && ({ready})", timeout=timeout)

    def click(self, selector: str) -> None:
        """Click the centre of the first element matching `selector`, as a mouse would."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'nearest'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        if box is None:
            raise ProtocolError(f"nothing on the page matches {selector!r}")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def type_text(self, selector: str, text: str) -> None:
        """Focus the element matching `selector` (by clicking it) and type `text` into it."""
        self.click(selector)
        self.send("Input.insertText", {"text": text})

    def press(self, key: str) -> None:
        """Press and release one named key (for example ``Enter``)."""
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": 13 if key == "Enter" else 0})

    def screenshot(self, path: Path) -> Path:
        """Save a PNG of the viewport to `path`."""
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self._socket.close()


class Browser:
    """A headless Chromium process with a private profile; `page()` opens its first tab."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, profile: Path) -> None:
        self.process = process
        self.port = port
        self.profile = profile

    @classmethod
    def start(cls, binary: str, profile: Path, *, width: int = 1440, height: int = 900) -> Browser:
        """Launch `binary` headless; waits for its DevTools endpoint."""
        profile.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(
            [
                binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--mute-audio",
                "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert process.stderr is not None
        seen = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stderr.readline().decode(errors="replace")
            if not line and process.poll() is not None:
                break
            seen.append(line)
            match = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if match:
                # Keep reading stderr so a chatty browser never blocks on a full pipe.
                threading.Thread(target=_drain, args=(process.stderr,), daemon=True).start()
                return cls(process, int(match.group(1)), profile)
        process.kill()
        process.wait()
        raise RuntimeError(f"{binary} did not start its DevTools endpoint:\n{''.join(seen)[-2000:]}")

    def page(self) -> Page:
        """A `Page` for the browser's first tab."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=30) as answer:
            targets = json.load(answer)
        tab = next(target for target in targets if target.get("type") == "page")
        return Page(tab["webSocketDebuggerUrl"])

    def stop(self) -> None:
        """End the browser process (it was started by us) and wait for it."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()
