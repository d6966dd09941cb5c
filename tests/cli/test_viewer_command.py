"""`dshkit log html`: which logs it reads, what the page embeds, and bad input (no browser needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dshkit
from dshkit.cli import main
from dshkit.cli.viewer import default_output
from dshkit.viewer.page import ASSETS, asset_text, embed_json
from dshkit.session import Session


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["log", "html", *args])
    out, err = capsys.readouterr()
    return code, out, err


def embedded(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    match = re.search(r'<script id="dshkit-data" type="application/json">(.*?)</script>', text, re.S)
    assert match is not None
    return json.loads(match.group(1))  # type: ignore[no-any-return]


def small_log(path: Path) -> list[str]:
    """A turn with a tool call and its result in `path`; the ids of its messages."""
    with Session.create(path) as session:
        user = dshkit.create_user_message("what time is it?", source={"kind": "user"})
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("user/message", user)
        session.append("request/header", {"reason": "initial", "header": {"system": "be brief", "tools": [{"name": "clock"}]}})
        call = dshkit.create_assistant_message(
            [{"type": "tool_call", "id": "c1", "name": "clock", "arguments": "{}"}], provider="p", model="m"
        )
        session.append("assistant/message", {"turn": 1, "step": 1, "message": call, "finish_reason": "tool_calls",
                                             "usage": {"input_tokens": 12, "output_tokens": 3}})
        result = dshkit.create_tool_result_message("c1", "noon")
        session.append("tool/result", {"turn": 1, "step": 1, "message": result})
        session.append("step/end", {"turn": 1, "step": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return [user.id, call.id, result.id]


@pytest.mark.parametrize("suffix", [".jsonl", ".sqlite"])
def test_the_page_embeds_every_message_of_any_store(tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    log = tmp_path / f"run{suffix}"
    ids = small_log(log)
    code, out, err = run(capsys, str(log))
    page = tmp_path / "run.html"  # without -o: beside the log, named after it
    assert (code, err) == (0, "") and out == f"{page}: 8 events\n"
    data = embedded(page)
    assert [message["id"] for message in data["messages"]] == ids
    assert [row[2] for row in data["events"]][:4] == ["turn/start", "step/start", "user/message", "request/header"]
    assert data["headers"] == [{"system": "be brief", "tools": [{"name": "clock"}]}]
    step = data["steps"]["1"]
    assert step == {"chunks": 0, "request_at": 3, "input_tokens": 12, "output_tokens": 3, "finish_reason": "tool_calls"}
    text = page.read_text(encoding="utf-8")
    for asset in ASSETS:
        assert asset_text(asset) in text  # inlined, nothing to fetch
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)


def test_a_postgresql_session_is_chosen_with_session(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with Session.create(postgres_url) as first, Session.create(postgres_url) as second:
        first.append("user/message", dshkit.create_user_message("in the first session", source={"kind": "user"}))
        second.append("user/message", dshkit.create_user_message("in the second session", source={"kind": "user"}))
        wanted = second.id
    code, out, err = run(capsys, postgres_url, "--session", wanted, "-o", str(tmp_path / "page.html"))
    assert (code, err) == (0, "") and out == f"{tmp_path / 'page.html'}: 1 events\n"
    data = embedded(tmp_path / "page.html")
    assert data["session"]["id"] == wanted
    assert [m["content"][0]["text"] for m in data["messages"]] == ["in the second session"]
    monkeypatch.chdir(tmp_path)
    code, _, _ = run(capsys, postgres_url, "--session", wanted)  # no -o: named after the session, here
    assert code == 0 and embedded(tmp_path / f"{wanted}.html")["session"]["id"] == wanted


def test_the_original_harness_log_opens_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = tmp_path / "session.jsonl"
    with Session.create(original, format="dsh") as session:
        session.append("user/message", dshkit.create_user_message("hello from dsh", source={"kind": "user"}))
    code, _, err = run(capsys, str(original), "-o", str(tmp_path / "page.html"))
    assert (code, err) == (0, "")
    assert embedded(tmp_path / "page.html")["messages"][0]["content"][0]["text"] == "hello from dsh"


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda lines: lines[:3] + ["{this is not json"] + lines[4:], r"line 4: checksum mismatch"),
        (lambda lines: lines[:2] + [lines[2].replace('"turn":1', '"turn":9')] + lines[3:], r"line 3: checksum mismatch"),
        (lambda lines: ["hello"], r"line 1: not a dshkit session log"),
    ],
    ids=["garbage-line", "edited-record", "not-a-log"],
)
def test_a_corrupt_log_gives_a_clear_error_and_no_page(tmp_path: Path, capsys: pytest.CaptureFixture[str], damage, expected: str) -> None:
    log = tmp_path / "run.jsonl"
    small_log(log)
    before = log.read_text()
    log.write_text("\n".join(damage(before.splitlines())) + "\n")
    assert log.read_text() != before
    code, out, err = run(capsys, str(log), "-o", str(tmp_path / "page.html"))
    assert code == 1 and out == ""
    assert re.match(rf"dshkit log html: {re.escape(str(log))}: {expected}", err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]  # no page, no temporary file


def test_a_missing_log_and_an_unwritable_target_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(tmp_path / "nope.jsonl"))
    assert code == 1 and err == f"dshkit log html: {tmp_path / 'nope.jsonl'}: no such file\n"
    log = tmp_path / "run.jsonl"
    small_log(log)
    code, _, err = run(capsys, str(log), "-o", str(tmp_path / "no-such-dir" / "page.html"))
    assert code == 1 and "no-such-dir" in err and err.startswith("dshkit log html: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]


def test_a_torn_last_line_is_left_out_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    small_log(log)
    whole = log.read_text()
    log.write_text(whole + '{"seq":8,"time":1,"type":"user/mess')  # a writer stopped mid-line
    code, out, err = run(capsys, str(log), "-o", str(tmp_path / "page.html"))
    assert code == 0 and out.endswith(": 8 events\n")
    assert err.startswith("warning: ") and "line 10" in err
    assert len(embedded(tmp_path / "page.html")["events"]) == 8
    assert log.read_text() == whole + '{"seq":8,"time":1,"type":"user/mess'  # read-only: nothing cut


def test_default_output_names() -> None:
    assert default_output("logs/run.jsonl", "S1") == "logs/run.html"
    assert default_output("session.jsonl.zstd", "S1") == "session.html"
    assert default_output("postgresql://localhost/db", "S1") == "S1.html"


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))
def test_embedded_json_reads_back_and_never_closes_its_element(value: object) -> None:
    text = embed_json(value)
    assert "<" not in text
    assert json.loads(text) == value


def test_a_script_end_inside_a_message_stays_data() -> None:
    text = embed_json({"text": "</script><!-- <script>"})
    assert "</script" not in text.lower() and json.loads(text) == {"text": "</script><!-- <script>"}
