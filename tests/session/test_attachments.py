"""Attachments: image and file blocks that refer to content-addressed bytes kept beside the log.

Every store keeps them (a folder beside a JSON Lines log, a table of SQLite and PostgreSQL, memory);
every API's projection inlines them; a missing or altered attachment is named, with its message.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import dshkit
from dshkit.cli.log import run as run_log_command
from dshkit.interop.anthropic import to_anthropic
from dshkit.interop.openai_chat import to_chat_messages
from dshkit.interop.openai_responses import to_response_items
from dshkit.models.anthropic.projection import anthropic_body
from dshkit.models.chat.projection import chat_body
from dshkit.models.projection_parts import encode_body
from dshkit.models.responses.projection import responses_body
from dshkit.session import Session, SessionClosedError, project_request
from dshkit.session import AttachmentError

from tests.session.stores.test_store_contract import StoreUnderTest, writable  # noqa: F401 - the fixture

PNG = bytes.fromhex("89504e470d0a1a0a") + b"not really a picture"


def _bodies(request: Any) -> dict[str, Any]:
    return {
        "chat": chat_body(request, model="m"),
        "anthropic": anthropic_body(request, model="m", max_tokens=16),
        "responses": responses_body(request, model="m"),
    }


def _ask_with(session: Session, *blocks: Any) -> dshkit.Message:
    message = dshkit.create_user_message([{"type": "text", "text": "Look:"}, *blocks], source={"kind": "user"})
    session.append("user/message", message)
    return message


def test_attach_gives_a_block_that_refers_to_the_bytes(tmp_path: Path) -> None:
    with Session.create(tmp_path / "log.jsonl") as session:
        image = session.attach(PNG, "image/png", name="shot.png")
        document = session.attach(b"%PDF-1.7 ...", "application/pdf")
    digest = hashlib.sha256(PNG).hexdigest()
    assert image == {"type": "image", "attachment": {"id": f"sha256:{digest}", "media_type": "image/png", "bytes": len(PNG), "name": "shot.png"}}
    assert document["type"] == "file" and document["attachment"]["media_type"] == "application/pdf"
    assert isinstance(image, dshkit.FrozenDict)
    stored = tmp_path / "attachments" / "objects" / digest[:2] / digest
    assert stored.read_bytes() == PNG
    assert not list((tmp_path / "attachments" / "tmp").iterdir())  # nothing left half-written


@pytest.mark.parametrize("kind", ["image", "file"])
def test_a_block_referring_to_an_attachment_is_validated(kind: str) -> None:
    good = {"id": "sha256:" + "ab" * 32, "media_type": "image/png" if kind == "image" else "text/csv", "bytes": 3}
    message = dshkit.create_user_message([{"type": kind, "attachment": good}], source={"kind": "user"})
    assert message.content[0]["attachment"]["id"] == good["id"]
    with pytest.raises(ValueError, match=r"content\[0\]\['attachment'\]\['id'\]: must be 'sha256:' and 64 lowercase hex digits"):
        dshkit.create_user_message([{"type": kind, "attachment": {**good, "id": "sha256:AB"}}], source={"kind": "user"})
    with pytest.raises(ValueError, match=r"an attachment is missing the str field 'media_type'"):
        dshkit.create_user_message([{"type": kind, "attachment": {"id": good["id"]}}], source={"kind": "user"})
    with pytest.raises(TypeError, match=r"\['attachment'\]: must be a mapping, not str"):
        dshkit.create_user_message([{"type": kind, "attachment": good["id"]}], source={"kind": "user"})
    with pytest.raises(ValueError, match=f"an? '{kind}' block needs"):
        dshkit.create_user_message([{"type": kind, "name": "x"}], source={"kind": "user"})


def test_attach_refuses_bad_arguments_and_read_only_sessions(tmp_path: Path) -> None:
    session = Session()
    with pytest.raises(TypeError, match="data must be bytes, not str"):
        session.attach("text", "text/plain")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="media_type must be a MIME type"):
        session.attach(b"x", "png")
    with pytest.raises(TypeError, match="media_type must be a str"):
        session.attach(b"x", None)  # type: ignore[arg-type]
    with Session.create(tmp_path / "log.jsonl") as created:
        created.append("user/message", dshkit.create_user_message("hi", source={"kind": "user"}))
    with Session.open(tmp_path / "log.jsonl", read_only=True) as read_only:
        with pytest.raises(SessionClosedError, match="read-only"):
            read_only.attach(PNG, "image/png")
    assert not (tmp_path / "attachments").exists()


def test_each_store_keeps_attachments_and_every_api_gets_the_bytes(writable: StoreUnderTest) -> None:
    store = writable
    data = PNG + os.urandom(8)  # the PostgreSQL table is shared by the test run's sessions
    with store.create() as session:
        image = session.attach(data, "image/png")
        document = session.attach(b"a,b\n1,2\n", "text/csv", name="table.csv")
        message = _ask_with(session, image, document)
        assert session.attach(data, "image/png") == image  # equal bytes: the same block, stored once
    with Session.open(store.location, **store.selector) as reopened:
        assert reopened.messages()[0] == message
        request = project_request(reopened)
        bodies = _bodies(request)
    encoded = base64.b64encode(data).decode()
    csv = base64.b64encode(b"a,b\n1,2\n").decode()
    assert bodies["chat"]["messages"][0]["content"][1:] == [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}},
        {"type": "file", "file": {"file_data": f"data:text/csv;base64,{csv}", "filename": "table.csv"}},
    ]
    assert bodies["anthropic"]["messages"][0]["content"][1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encoded}},
        {"type": "document", "source": {"type": "base64", "media_type": "text/csv", "data": csv}, "title": "table.csv"},
    ]
    assert bodies["responses"]["input"][0]["content"][1:] == [
        {"type": "input_image", "image_url": f"data:image/png;base64,{encoded}", "detail": "auto"},
        {"type": "input_file", "file_data": f"data:text/csv;base64,{csv}", "filename": "table.csv"},
    ]


def test_a_request_with_attachments_is_rebuilt_byte_for_byte(tmp_path: Path) -> None:
    with Session.create(tmp_path / "log.jsonl") as session:
        _ask_with(session, session.attach(PNG, "image/png"))
        header = session.append("request/header", {"header": {"system": "terse"}, "reason": "initial"})
        sent = encode_body(chat_body(project_request(session), model="m"))
        session.append("user/message", dshkit.create_user_message("more", source={"kind": "user"}))
    with Session.open(tmp_path / "log.jsonl", read_only=True) as reopened:
        assert encode_body(chat_body(project_request(reopened, at_seq=header.seq), model="m")) == sent


def test_a_missing_attachment_names_itself_and_its_message(writable: StoreUnderTest) -> None:
    store = writable
    data = PNG + os.urandom(8)
    with store.create() as session:
        message = _ask_with(session, session.attach(data, "image/png"))
    digest = hashlib.sha256(data).hexdigest()
    store.change_attachment(digest, None)
    with Session.open(store.location, **store.selector) as reopened:
        for name, project in (("chat", chat_body), ("responses", responses_body)):
            with pytest.raises(AttachmentError, match=f"attachment sha256:{digest} \\(referred to by message {message.id} content\\[1\\]\\) is missing") as caught:
                project(project_request(reopened), model="m")
            assert caught.value.attachment_id == f"sha256:{digest}", name
        with pytest.raises(AttachmentError, match=f"message {message.id} content\\[1\\]"):
            anthropic_body(project_request(reopened), model="m", max_tokens=1)


def test_altered_bytes_are_refused_on_read(tmp_path: Path) -> None:
    with Session.create(tmp_path / "log.jsonl") as session:
        message = _ask_with(session, session.attach(PNG, "image/png"))
    digest = hashlib.sha256(PNG).hexdigest()
    (tmp_path / "attachments" / "objects" / digest[:2] / digest).write_bytes(PNG + b"!")
    with Session.open(tmp_path / "log.jsonl") as reopened:
        with pytest.raises(AttachmentError, match=f"sha256:{digest} \\(referred to by message {message.id} content\\[1\\]\\) is corrupt"):
            chat_body(project_request(reopened), model="m")


def test_log_verify_checks_every_referenced_attachment(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:
        kept = session.attach(PNG, "image/png")
        lost = session.attach(b"lost bytes", "text/plain")
        result = dshkit.create_tool_result_message("c1", [{"type": "text", "text": "here"}, lost])
        _ask_with(session, kept)
        session.append("assistant/message", {"message": dshkit.create_assistant_message(
            [{"type": "tool_call", "id": "c1", "name": "read", "arguments": "{}"}], provider="p", model="m")})
        session.append("tool/result", {"message": result})
    out, err = io.StringIO(), io.StringIO()
    assert run_log_command("verify", str(path), out, err) == 0, out.getvalue()
    lost_digest = lost["attachment"]["id"].removeprefix("sha256:")
    (tmp_path / "attachments" / "objects" / lost_digest[:2] / lost_digest).unlink()
    out = io.StringIO()
    assert run_log_command("verify", str(path), out, err) == 1
    report = out.getvalue()
    assert f"line 4: attachment {lost['attachment']['id']} (referred to by message {result.id} content[0].content[1]) is missing" in report
    assert kept["attachment"]["id"] not in report


def test_an_in_memory_session_keeps_attachments_and_a_fork_copies_them(tmp_path: Path) -> None:
    session = Session()
    message = _ask_with(session, session.attach(PNG, "image/png"))
    (tmp_path / "elsewhere").mkdir()
    with session.fork(dest=tmp_path / "elsewhere" / "child.jsonl") as child:
        assert child.messages()[0] == message
    digest = hashlib.sha256(PNG).hexdigest()
    assert (tmp_path / "elsewhere" / "attachments" / "objects" / digest[:2] / digest).read_bytes() == PNG
    with Session.open(tmp_path / "elsewhere" / "child.jsonl") as reopened:
        url = chat_body(project_request(reopened), model="m")["messages"][0]["content"][1]["image_url"]["url"]
    assert url == "data:image/png;base64," + base64.b64encode(PNG).decode()


def test_converters_export_attachments_inline(tmp_path: Path) -> None:
    with Session.create(tmp_path / "log.jsonl") as session:
        _ask_with(session, session.attach(PNG, "image/png"))
        messages = session.messages()
        with pytest.raises(AttachmentError, match="cannot be read: no attachments were given"):
            to_chat_messages(messages)
        encoded = base64.b64encode(PNG).decode()
        chat = to_chat_messages(messages, attachments=session.attachments)
        assert chat[0]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}}
        _, anthropic = to_anthropic(messages, attachments=session.attachments)
        assert anthropic[0]["content"][1]["source"] == {"type": "base64", "media_type": "image/png", "data": encoded}
        items = to_response_items(messages, attachments=session.attachments)
        assert json.dumps(items).count(encoded) == 1


@pytest.mark.parametrize(
    ("media_type", "why"),
    [
        ("image/png;base64,AAAA,", "parameters and separators"),  # would rewrite the data: URL it goes into
        ("text/plain; charset=utf-8", "parameters and separators"),
        ("image/png\r\nX-Injected: 1", "parameters and separators"),
        ("image/png\n", "parameters and separators"),
        ("image/pn\x00g", "RFC 6838 name"),
        ("image/", "RFC 6838 name"),
        ("/png", "RFC 6838 name"),
        ("image/png/x", "RFC 6838 name"),
        ("imäge/png", "RFC 6838 name"),
        ("png", "no '/'"),
        ("", "no '/'"),
    ],
)
def test_attach_takes_only_a_bare_type_and_subtype(media_type: str, why: str) -> None:
    session = Session()
    with pytest.raises(ValueError, match=f"media_type must be a MIME type.*{re.escape(why)}"):
        session.attach(PNG, media_type)


def test_attach_keeps_every_well_formed_media_type_in_lower_case() -> None:
    session = Session()
    for media_type in ("image/png", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "text/x-c++src", "image/svg+xml"):
        assert session.attach(PNG, media_type)["attachment"]["media_type"] == media_type
    block = session.attach(PNG, "Image/PNG")
    assert block["type"] == "image" and block["attachment"]["media_type"] == "image/png"


def test_attaching_the_same_bytes_again_heals_damaged_bytes(writable: StoreUnderTest) -> None:
    data = PNG + os.urandom(8)
    with writable.create() as session:
        block = session.attach(data, "image/png")
        _ask_with(session, block)
    identity = block["attachment"]["id"]
    writable.change_attachment(identity.removeprefix("sha256:"), b"\x00" + data[1:])  # one flipped byte
    with Session.open(writable.location, **writable.selector) as session:
        with pytest.raises(AttachmentError, match="is corrupt"):
            session.attachments.read(identity)
        assert session.attach(data, "image/png") == block
        assert session.attachments.read(identity) == data
    with Session.open(writable.location, **writable.selector, read_only=True) as reopened:
        assert reopened.attachments.read(identity) == data  # healed on disk, not only in memory


def test_attaching_again_leaves_good_bytes_alone(tmp_path: Path) -> None:
    with Session.create(tmp_path / "log.jsonl") as session:
        session.attach(PNG, "image/png")
        stored = tmp_path / "attachments" / "objects" / hashlib.sha256(PNG).hexdigest()[:2] / hashlib.sha256(PNG).hexdigest()
        inode = stored.stat().st_ino
        session.attach(PNG, "image/png")
    assert stored.stat().st_ino == inode and stored.read_bytes() == PNG
