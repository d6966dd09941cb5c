"""The agent continues an original log with images over real HTTP: the bytes go on the wire."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest

from dshkit import create_user_message
from dshkit.agent import Agent
from dshkit.models import Provider
from dshkit.models.chat.model import OpenAICompatibleModel
from dshkit.session import Session, project_request

from tests.session.dsh.scenarios import PIXEL, SCREENSHOT, images

pytest.importorskip("zstandard")
PHOTO = b"\xff\xd8\xff a jpeg the user attaches now"


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


def _run_turn(loopback: Any, path: Path) -> None:
    model = OpenAICompatibleModel("deepseek-chat", Provider(loopback.base_url, api_key="sk-test", name="deepseek", timeout=5.0, retry_backoff=0.01))

    async def main() -> None:
        with Session.open(path) as session:
            agent = Agent(model, session=session)
            prompt = create_user_message([{"type": "text", "text": "And this one?"}, session.attach(PHOTO, "image/jpeg")],
                                         source={"kind": "user"})
            async with model:
                agent.followup(prompt)
                await agent.when_idle()

    asyncio.run(main())


def test_the_agent_sends_the_logged_and_the_new_images(loopback: Any, wire: Any, tmp_path: Path) -> None:
    log = images()
    folder = tmp_path / "dsh-home" / "sessions" / "--work--" / log.header["id"]
    folder.mkdir(parents=True)
    path = log.write(folder / "session.jsonl", home=tmp_path / "dsh-home")
    loopback.reply(wire.sse_reply(wire.answer("A pixel, a screen and a photo.")))
    _run_turn(loopback, path)
    [sent] = loopback.received
    urls = [part["image_url"]["url"] for message in sent.json["messages"] if isinstance(message["content"], list)
            for part in message["content"] if part["type"] == "image_url"]
    assert urls == [_data_url("image/png", PIXEL), _data_url("image/png", SCREENSHOT), _data_url("image/jpeg", PHOTO)]
    digest = hashlib.sha256(PHOTO).hexdigest()
    assert (tmp_path / "dsh-home" / "attachments" / "v1" / "objects" / digest[:2] / digest).read_bytes() == PHOTO
    with Session.open(path, read_only=True) as session:
        header = [e for e in session.events if e.type == "request/header"][-1]
        model = OpenAICompatibleModel("deepseek-chat", Provider(loopback.base_url, api_key="sk-test", name="deepseek"))
        assert model.request_body(project_request(session, at_seq=header.seq)) == sent.body  # rebuilt to the byte


def test_a_missing_attachment_ends_the_turn_with_an_error_naming_it(loopback: Any, wire: Any, tmp_path: Path) -> None:
    log = images()
    path = log.write(tmp_path / "session.jsonl")
    digest = hashlib.sha256(SCREENSHOT).hexdigest()
    (tmp_path / "attachments" / "v1" / "objects" / digest[:2] / digest).unlink()
    _run_turn(loopback, path)
    assert loopback.received == []  # nothing was sent
    with Session.open(path, read_only=True) as session:
        [end] = [e for e in session.events if e.type == "turn/end"][-1:]
    assert end.data["reason"]["kind"] == "error"
    assert f"attachment sha256:{digest}" in end.data["reason"]["error"]["message"]
    assert "is missing" in end.data["reason"]["error"]["message"]
