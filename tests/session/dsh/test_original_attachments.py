"""Original-harness logs whose image blocks refer to attachments kept in `<DSH_HOME>/attachments/v1`."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dshkit
from dshkit.cli.log import run as run_log_command
from dshkit.models.anthropic.projection import anthropic_body
from dshkit.models.chat.projection import chat_body
from dshkit.session import Session, convert_log, project_request
from dshkit.session import AttachmentError
from dshkit.session.dsh.vocabulary import message_to_dshkit, message_to_original

from tests.session.dsh.original_logs import OriginalLog, user
from tests.session.dsh.scenarios import PIXEL, SCREENSHOT, images

pytest.importorskip("zstandard")


def _data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def _home_log(home: Path, log: OriginalLog, suffix: str = "session.jsonl") -> Path:
    """The log where the original keeps it below DSH_HOME, its attachments in `home/attachments/v1`."""
    folder = home / "sessions" / "--work-project--" / log.header["id"]
    folder.mkdir(parents=True)
    return log.write(folder / suffix, home=home)


def _verify(path: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_log_command("verify", str(path), out, err)
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("suffix", ["session.jsonl", "session.jsonl.zstd"])
def test_an_original_log_with_images_opens_and_its_requests_carry_the_bytes(tmp_path: Path, suffix: str) -> None:
    path = _home_log(tmp_path / "dsh-home", images(), suffix)
    assert _verify(path)[0] == 0
    with Session.open(path, read_only=True) as session:
        prompt, call, result, answer = session.messages()
        assert prompt.content[1] == {"type": "image", "attachment": {
            "id": "sha256:" + hashlib.sha256(PIXEL).hexdigest(), "media_type": "image/png", "width": 1, "height": 1,
            "bytes": len(PIXEL), "name": "red.png"}}
        body = chat_body(project_request(session), model="m")
        assert body["messages"][0] == {"role": "system", "content": "You are terse."}
        assert body["messages"][1]["content"][1] == {"type": "image_url", "image_url": {"url": _data_url(PIXEL)}}
        assert body["messages"][4]["content"][1] == {"type": "image_url", "image_url": {"url": _data_url(SCREENSHOT)}}
        anthropic = anthropic_body(project_request(session), model="m", max_tokens=8)
        tool_result = anthropic["messages"][2]["content"][0]
        assert tool_result["content"][1]["source"]["data"] == base64.b64encode(SCREENSHOT).decode()


def test_dsh_home_names_the_attachments_of_a_log_kept_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = images()
    home = tmp_path / "home"
    log.write_attachments(home)
    (tmp_path / "logs").mkdir()
    path = tmp_path / "logs" / "session.jsonl"
    path.write_text("\n".join([json.dumps(log.header), *log.lines()]) + "\n")
    with Session.open(path, read_only=True) as session:
        with pytest.raises(AttachmentError, match=f"sha256:{hashlib.sha256(PIXEL).hexdigest()} .*is missing: nothing at {tmp_path}/logs/attachments/v1/objects"):
            chat_body(project_request(session), model="m")
    monkeypatch.setenv("DSH_HOME", str(home))
    with Session.open(path, read_only=True) as session:
        assert chat_body(project_request(session), model="m")["messages"][1]["content"][1]["image_url"]["url"] == _data_url(PIXEL)


def test_a_missing_original_attachment_is_named_by_verify(tmp_path: Path) -> None:
    log = images()
    path = _home_log(tmp_path / "dsh-home", log)
    digest = hashlib.sha256(SCREENSHOT).hexdigest()
    (tmp_path / "dsh-home" / "attachments" / "v1" / "objects" / digest[:2] / digest).unlink()
    code, report = _verify(path)
    assert code == 1
    assert f"attachment sha256:{digest} (referred to by message" in report and "content[0].content[1]) is missing" in report


@pytest.mark.parametrize("middle", ["dshkit.jsonl", "dshkit.sqlite"])
def test_conversion_both_ways_carries_the_attachments(tmp_path: Path, middle: str) -> None:
    src = _home_log(tmp_path / "dsh-home", images())
    (tmp_path / "converted").mkdir()
    (tmp_path / "back").mkdir()
    convert_log(src, tmp_path / "converted" / middle, format="dshkit")
    assert _verify(tmp_path / "converted" / middle)[0] == 0
    with Session.open(tmp_path / "converted" / middle, read_only=True) as converted:
        body = chat_body(project_request(converted), model="m")
        assert body["messages"][1]["content"][1]["image_url"]["url"] == _data_url(PIXEL)
    convert_log(tmp_path / "converted" / middle, tmp_path / "back" / "session.jsonl", format="dsh")
    written = (tmp_path / "back" / "session.jsonl").read_text()
    assert f'"attachmentId":"sha256:{hashlib.sha256(PIXEL).hexdigest()}"' in written  # the original's own form
    for data in (PIXEL, SCREENSHOT):
        digest = hashlib.sha256(data).hexdigest()
        assert (tmp_path / "back" / "attachments" / "v1" / "objects" / digest[:2] / digest).read_bytes() == data
    assert _verify(tmp_path / "back" / "session.jsonl")[0] == 0


def test_an_original_log_continues_with_a_new_attachment(tmp_path: Path) -> None:
    path = _home_log(tmp_path / "dsh-home", images())
    photo = b"\xff\xd8\xff a jpeg the user added later"
    with Session.open(path) as session:
        block = session.attach(photo, "image/jpeg", name="later.jpg")
        prompt = dshkit.create_user_message([{"type": "text", "text": "and this?"}, block], source={"kind": "user"})
        session.append("user/message", prompt)
    last = json.loads(path.read_text().splitlines()[-1])
    digest = hashlib.sha256(photo).hexdigest()
    assert last["data"]["content"][1] == {"type": "image", "attachment": {
        "attachmentId": f"sha256:{digest}", "mediaType": "image/jpeg", "bytes": len(photo), "name": "later.jpg"}}
    assert (tmp_path / "dsh-home" / "attachments" / "v1" / "objects" / digest[:2] / digest).read_bytes() == photo
    with Session.open(path, read_only=True) as reopened:
        body = chat_body(project_request(reopened), model="m")
    assert body["messages"][-1]["content"][1]["image_url"]["url"] == "data:image/jpeg;base64," + base64.b64encode(photo).decode()
    assert body["messages"][1]["content"][1]["image_url"]["url"] == _data_url(PIXEL)
    assert _verify(path)[0] == 0


def test_a_log_without_images_needs_no_attachment_folder(tmp_path: Path) -> None:
    log = OriginalLog()
    log.event("user/message", user("hi"), surfaceOp="append")
    path = log.write(tmp_path / "session.jsonl")
    assert _verify(path)[0] == 0
    assert not (tmp_path / "attachments").exists()


_REFERENCE_FIELDS = {
    "mediaType": st.sampled_from(["image/png", "image/jpeg", "image/webp", "image/gif"]),
    "bytes": st.integers(0, 2**40),
    "width": st.integers(1, 8192),
    "height": st.integers(1, 8192),
    "name": st.text(max_size=20),
    "originalDimensions": st.fixed_dictionaries({"width": st.integers(1, 9000), "height": st.integers(1, 9000)}),
}


@given(
    digest=st.binary(min_size=1, max_size=8).map(lambda raw: hashlib.sha256(raw).hexdigest()),
    order=st.permutations(list(_REFERENCE_FIELDS)),
    present=st.lists(st.booleans(), min_size=len(_REFERENCE_FIELDS), max_size=len(_REFERENCE_FIELDS)),
    data=st.data(),
)
def test_an_original_image_reference_maps_to_dshkit_and_back_exactly(digest: str, order: list[str], present: list[bool], data: st.DataObject) -> None:
    reference = {"attachmentId": f"sha256:{digest}"}
    for key, keep in zip(order, present):
        if keep or key == "mediaType":
            reference[key] = data.draw(_REFERENCE_FIELDS[key])
    original = {"content": [{"type": "image", "attachment": reference}], "source": {"kind": "user"}, "role": "user", "id": "u-1"}
    message = message_to_dshkit(original)
    assert message.content[0]["attachment"]["id"] == reference["attachmentId"]
    assert message.content[0]["attachment"]["media_type"] == reference["mediaType"]
    back = message_to_original(message)
    assert dshkit.to_json(back["content"]) == dshkit.to_json(original["content"])  # same keys, same order
