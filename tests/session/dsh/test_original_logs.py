"""Original-harness logs: open, fold, rebuild requests, verify, convert both ways, continue."""

from __future__ import annotations

import io
import json
import os
import warnings
from pathlib import Path

import pytest

from dshkit import create_user_message
from dshkit.session import Session, SessionCorruptError, SessionRecoveryWarning, UnknownEventError, convert_log, project_request
from dshkit.cli.log import run as run_log_command
from dshkit.session import JsonlStore, SessionError, SqliteStore, open_store
from dshkit.session.dsh.jsonl_store import DshJsonlStore
from dshkit.session.dsh.sqlite_store import DshSqliteStore, encode_source_seqs, list_original_sessions
from dshkit.session.dsh.vocabulary import message_to_original
from tests.session.dsh.original_logs import OriginalLog, reference_messages, tool_result, user, write_sqlite_db
from tests.session.dsh.scenarios import SCENARIOS, crashed_turn

zstandard = pytest.importorskip("zstandard")
SUFFIXES = ("session.jsonl", "session.jsonl.zstd")


def _write(log: OriginalLog, tmp_path: Path, name: str) -> Path:
    for index in range(0, len(log.records), 5):
        log.frames.append(index)
    return log.write(tmp_path / name)


def _expand(records: list[dict]) -> list[dict]:
    holder = OriginalLog()
    holder.records = records
    return holder.expanded()


def _read_original(path: Path) -> tuple[dict, list[dict]]:
    raw = path.read_bytes()
    if path.name.endswith(".zstd"):
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        reader = zstandard.ZstdDecompressor().stream_reader(path.read_bytes(), read_across_frames=True)
        raw = reader.read()
    lines = raw.decode().splitlines()
    return json.loads(lines[0]), _expand([json.loads(line) for line in lines[1:]])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("suffix", SUFFIXES)
def test_open_gives_the_original_fold_with_its_ids(tmp_path: Path, name: str, suffix: str) -> None:
    log = SCENARIOS[name]()
    path = _write(log, tmp_path, suffix)
    expected_events = log.expanded()
    with Session.open(path, read_only=True) as session:
        assert session.format == "dsh"
        assert session.id == log.header["id"] and session.created_at == log.header["createdAt"]
        assert [(e.type, e.seq, e.time) for e in session.events] == [(e["type"], e["seq"], e["time"]) for e in expected_events]
        messages = session.messages()
        assert [message_to_original(m) for m in messages] == reference_messages(expected_events)
        assert [m.id for m in messages] == [m["id"] for m in reference_messages(expected_events)]


def test_events_are_presented_in_dshkit_vocabulary(tmp_path: Path) -> None:
    path = _write(SCENARIOS["parallel_tools"](), tmp_path, "session.jsonl")
    with Session.open(path, read_only=True) as session:
        by_type = {}
        for event in session.events:
            by_type.setdefault(event.type, []).append(event)
        calls = by_type["assistant/message"][0].data["message"].tool_calls
        assert [call["type"] for call in calls] == ["tool_call", "tool_call"]
        assert by_type["tool/call"][0].data["call_id"] == "call_00_a"
        result = by_type["tool/result"][1].data["message"]
        assert result.source == {"kind": "tool", "call_id": "call_00_a"}
        assert result.content[0]["tool_call_id"] == "call_00_a" and result.content[0]["is_error"] is False
        assert by_type["agent/inbox/spliced"][1].data["target"] == "next_turn"
        assert by_type["agent/inbox/spliced"][1].data["removed_count"] == 1
        assert by_type["session/title"][0].data["ignorable"] is True
        chunk = by_type["assistant/chunk"][1]
        assert chunk.data["chunk"] == {"type": "tool-call-delta", "index": 0, "id": "call_00_a", "name": "bash", "argumentsDelta": 'mand":'}
        assert session.pending_tool_calls() == ()


def test_turn_end_reasons_and_replace_ranges_are_mapped(tmp_path: Path) -> None:
    with Session.open(_write(SCENARIOS["cancellation_and_max_tokens"](), tmp_path, "a.jsonl"), read_only=True) as session:
        reasons = [event.data["reason"] for event in session.events if event.type == "turn/end"]
        assert reasons[0] == {"kind": "max_tokens"}
        assert reasons[1] == {"kind": "aborted", "cause": "user"}
        assert reasons[2]["kind"] == "error"
    with Session.open(_write(SCENARIOS["compaction_and_inbox"](), tmp_path, "b.jsonl"), read_only=True) as session:
        ops = [event.surface_op for event in session.events if event.surface_op not in (None, "append")]
        assert ops == [{"op": "replace", "start": 0, "end": 2}, {"op": "replace", "start": 3, "end": 4}]
        assert session.messages()[0].text == "Summary: one question answered."
        assert session.messages()[-1].content[0]["content"][0]["text"] == "[pruned]"


def test_the_request_is_rebuilt_from_the_header(tmp_path: Path) -> None:
    with Session.open(_write(SCENARIOS["text_and_reasoning"](), tmp_path, "session.jsonl"), read_only=True) as session:
        header_seq = session.request_header.seq
        request = project_request(session, at_seq=header_seq)
        assert request.config == {"max_tokens": 4096, "reasoning_effort": "high"}
        assert "model" not in request.config
        assert session.request_header.data["header"]["provider"] == "deepseek-official"
        assert session.request_header.data["header"]["model"] == "deepseek-v4-flash"
        assert request.system == "You are terse." and request.tools[0]["name"] == "bash"
        assert [m.text for m in request.messages] == ["Reply PONG"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_request_is_rebuilt_as_the_original_folded_it(tmp_path: Path, name: str) -> None:
    log = SCENARIOS[name]()
    expanded = log.expanded()
    with Session.open(_write(log, tmp_path, "session.jsonl.zstd"), read_only=True) as session:
        responses = [event for event in session.events if event.type == "assistant/message"]
        assert responses
        for response in responses:
            # The request behind a response: the log as it stood just before the response.
            request = project_request(session, at_seq=response.seq - 1)
            assert [message_to_original(m) for m in request.messages] == reference_messages(expanded[: response.seq])
            headers = [e["data"]["header"] for e in expanded[: response.seq] if e["type"] == "request/header"]
            assert headers, "every scenario sends a request/header before its first response"
            config = {_snake(key): value for key, value in headers[-1]["config"].items() if key not in ("provider", "model")}
            assert request.config == config
            assert request.system == headers[-1].get("system")


def _snake(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_log_verify_passes(tmp_path: Path, name: str) -> None:
    log = SCENARIOS[name]()
    path = _write(log, tmp_path, "session.jsonl.zstd")
    out, err = io.StringIO(), io.StringIO()
    assert run_log_command("verify", str(path), out, err) == 0, out.getvalue() + err.getvalue()
    messages = io.StringIO()
    assert run_log_command("messages", str(path), messages, err) == 0
    ids = [json.loads(line)["id"] for line in messages.getvalue().splitlines()]
    assert ids == [m["id"] for m in reference_messages(log.expanded())]
    shown = io.StringIO()
    assert run_log_command("show", str(path), shown, err) == 0 and err.getvalue() == ""
    assert all(message_id in shown.getvalue() for message_id in ids)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("middle", ["dshkit.jsonl", "dshkit.sqlite"])
def test_original_to_dshkit_to_original_keeps_every_event(tmp_path: Path, name: str, middle: str) -> None:
    log = SCENARIOS[name]()
    src = _write(log, tmp_path, "src.jsonl.zstd")
    convert_log(src, tmp_path / middle, format="dshkit")
    with Session.open(tmp_path / middle, read_only=True) as converted:
        assert converted.format == "dshkit" and converted.id == log.header["id"]
        with Session.open(src, read_only=True) as original:
            assert converted.messages() == original.messages()
            assert list(converted.events) == list(original.events)
    back = tmp_path / "back.jsonl"
    convert_log(tmp_path / middle, back, format="dsh")
    header, events = _read_original(back)
    assert header == log.header
    assert events == log.expanded()


def test_dshkit_to_original_to_dshkit_keeps_every_event(tmp_path: Path) -> None:
    src = _write(SCENARIOS["compaction_and_inbox"](), tmp_path, "src.jsonl")
    convert_log(src, tmp_path / "a.jsonl", format="dshkit")
    convert_log(tmp_path / "a.jsonl", tmp_path / "b.jsonl.zstd", format="dsh")
    convert_log(tmp_path / "b.jsonl.zstd", tmp_path / "c.jsonl", format="dshkit")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "c.jsonl").read_bytes()


def test_convert_never_overwrites_and_reports_progress(tmp_path: Path) -> None:
    src = _write(SCENARIOS["text_and_reasoning"](), tmp_path, "src.jsonl")
    seen: list[tuple[int, int]] = []
    convert_log(src, tmp_path / "out.jsonl", progress=lambda done, total: seen.append((done, total)))
    assert seen[-1][0] == seen[-1][1] == len(SCENARIOS["text_and_reasoning"]().expanded())
    with pytest.raises(FileExistsError):
        convert_log(src, tmp_path / "out.jsonl")
    with pytest.raises(ValueError, match="format"):
        convert_log(src, tmp_path / "x.jsonl", format="json")


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_appending_continues_in_the_original_format(tmp_path: Path, suffix: str) -> None:
    log = SCENARIOS["parallel_tools"]()
    path = _write(log, tmp_path, suffix)
    with Session.open(path) as session:
        before = len(session.events)
        session.append("turn/start", {"turn": 2})
        session.append("step/start", {"turn": 2, "step": 1})
        prompt = create_user_message("again", source={"kind": "user"})
        session.append("user/message", prompt)
        session.append("turn/end", {"turn": 2, "reason": {"kind": "max_tokens"}})
        replaced = session.replace(session.messages()[0].with_content("shorter prompt"))
    header, events = _read_original(path)
    assert header == log.header
    assert events[: before] == log.expanded()
    added = events[before:]
    assert added[2] == {"type": "user/message", "seq": before + 2, "time": added[2]["time"],
                        "data": message_to_original(prompt), "surfaceOp": "append"}
    assert added[3]["data"]["reason"] == {"kind": "max-tokens"}
    first_user_seq = log.expanded().index(next(e for e in log.expanded() if e["type"] == "user/message"))
    assert added[4]["surfaceOp"] == {"op": "replace", "start": first_user_seq, "end": first_user_seq}
    assert added[4]["sourceEventSeqs"] == [first_user_seq] and replaced.seq == before + 4
    with Session.open(path, read_only=True) as reopened:
        assert reopened.messages()[0].text == "shorter prompt" and reopened.messages()[-1] == prompt


def test_create_in_the_original_format(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl.zstd"
    with Session.create(path, format="dsh") as session:
        session.append("user/message", create_user_message("hi", source={"kind": "user"}))
    header, events = _read_original(path)
    assert header["version"] == 0 and header["delegationDepth"] == 0 and header["id"] == session.id
    assert events[0]["type"] == "user/message" and events[0]["surfaceOp"] == "append"
    with pytest.raises(ValueError, match="format"):
        Session.create(tmp_path / "x.jsonl", format="v0")


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_crashed_turn_is_closed_by_the_original_rules(tmp_path: Path, suffix: str) -> None:
    log = crashed_turn()
    path = _write(log, tmp_path, suffix)
    with Session.open(path) as session:
        closers = list(session.events[log.seq :])
    assert [event.type for event in closers] == ["tool/result", "tool/result", "step/end", "turn/end"]
    unknown, not_started = closers[0], closers[1]
    assert unknown.data["message"].id == f"interrupted-tool-result-call_a-{log.seq}"
    assert unknown.data["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    assert unknown.source_event_seqs == (log.seq - 1,)
    assert not_started.data["message"].id == f"interrupted-tool-result-call_b-{log.seq + 1}"
    assert not_started.data["error"]["code"] == "TOOL_NOT_STARTED" and not_started.source_event_seqs == ()
    assert closers[3].data["reason"] == {"kind": "interrupted"} and closers[3].time == log.time
    _header, events = _read_original(path)
    assert events[log.seq]["data"]["message"]["content"][0]["isError"] is True
    assert "sourceEventSeqs" not in events[log.seq + 1]
    with Session.open(path) as again:
        assert len(again.events) == log.seq + 4


def test_a_torn_final_frame_keeps_its_complete_lines(tmp_path: Path) -> None:
    log = crashed_turn()
    path = _write(log, tmp_path, "session.jsonl.zstd")
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    tail = log.lines()[-1]  # a last batch: two complete lines and a torn one
    extra = compressor.compress((json.dumps({"type": "hook/invoked", "seq": log.seq, "time": log.time, "data": {}}) + "\n" + tail[:20]).encode())
    with open(path, "ab") as file:
        file.write(extra[:-2])  # the crash cut the frame inside its checksum: every block is there
    with pytest.warns(SessionRecoveryWarning, match="torn last Zstandard frame"):
        session = Session.open(path)
    with session:
        assert session.events[log.seq].type == "hook/invoked"
        assert session.events[-1].type == "turn/end"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Session.open(path, read_only=True) as reopened:
            assert len(reopened.events) == log.seq + 5


def test_a_torn_plain_line_is_cut(tmp_path: Path) -> None:
    log = SCENARIOS["text_and_reasoning"]()
    path = log.write(tmp_path / "session.jsonl")
    with open(path, "a") as file:
        file.write('{"type":"turn/start","seq":')
    with pytest.warns(SessionRecoveryWarning, match="torn last line"):
        Session.open(path).close()
    assert path.read_text().endswith("}\n")


def test_a_corrupt_line_names_its_line(tmp_path: Path) -> None:
    log = SCENARIOS["text_and_reasoning"]()
    path = log.write(tmp_path / "session.jsonl")
    lines = path.read_text().splitlines()
    lines[3] = lines[3][:-5]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SessionCorruptError, match=r"session.jsonl: line 4: not valid JSON"):
        Session.open(path)
    lines = log.write(tmp_path / "gap.jsonl").read_text().splitlines()
    lines[5] = lines[5].replace('"seq":4', '"seq":40')
    (tmp_path / "gap.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(SessionCorruptError, match=r"gap.jsonl: line 6: .*seq 40 where 4 was expected"):
        Session.open(tmp_path / "gap.jsonl")
    for equal_but_no_int in ("4.0", "4e0"):
        lines = log.write(tmp_path / "float.jsonl").read_text().splitlines()
        lines[5] = lines[5].replace('"seq":4', '"seq":' + equal_but_no_int)
        (tmp_path / "float.jsonl").write_text("\n".join(lines) + "\n")
        with pytest.raises(SessionCorruptError, match=r"float.jsonl: line 6: .*seq 4.0 where 4 was expected"):
            Session.open(tmp_path / "float.jsonl")
    bool_row = OriginalLog()
    bool_row.records.append({"type": "text-chunks", "seq0": False, "time0": 1, "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]}})
    with pytest.raises(SessionCorruptError, match=r"line 2: .*seq0 False where 0 was expected"):
        Session.open(bool_row.write(tmp_path / "bool_row.jsonl"))
    bad_row = OriginalLog()
    bad_row.records.append({"type": "text-chunks", "seq0": 0, "time0": 1, "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b", "c"]}})
    with pytest.raises(SessionCorruptError, match=r"line 2: .*dt must hold 2 int gaps"):
        Session.open(bad_row.write(tmp_path / "row.jsonl"))
    retired = OriginalLog(sandboxMode="strict")
    with pytest.raises(SessionCorruptError, match="line 1: .*retired field 'sandboxMode'"):
        Session.open(retired.write(tmp_path / "retired.jsonl"))


def test_an_unknown_type_blocks_only_when_the_original_would_refuse_it(tmp_path: Path) -> None:
    log = SCENARIOS["fork_seed_and_unknown"]()
    with Session.open(log.write(tmp_path / "ok.jsonl"), read_only=True) as session:
        assert [m.text for m in session.messages()] == ["seeded", "after the seed", "ok"]
        assert any(event.type == "session/end-seed" for event in session.events)
    log.event("future/refused", {"x": 1})
    with Session.open(log.write(tmp_path / "blocked.jsonl"), read_only=True) as session:
        with pytest.raises(UnknownEventError, match="future/refused"):
            session.messages()


def test_a_compressed_log_without_zstandard_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(SCENARIOS["text_and_reasoning"](), tmp_path, "session.jsonl.zstd")
    monkeypatch.setitem(__import__("sys").modules, "zstandard", None)
    with pytest.raises(ImportError, match=r"dshkit\[dsh\]"):
        Session.open(path)


def _sqlite_db(path: Path, log: OriginalLog) -> None:
    write_sqlite_db(path, log.header, log.records)


def _two_sessions_db(db: Path) -> tuple[OriginalLog, OriginalLog]:
    """An original SQLite database holding two sessions, the second created 1 ms after the first."""
    first, second = SCENARIOS["compaction_and_inbox"](), SCENARIOS["text_and_reasoning"]()
    second.header["createdAt"] = first.header["createdAt"] + 1
    _sqlite_db(db, first)
    _sqlite_db(db, second)
    return first, second


def test_the_original_sqlite_store_is_read(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    first, second = _two_sessions_db(db)
    listed = list_original_sessions(db)
    assert [row["id"] for row in listed] == [first.header["id"], second.header["id"]]
    assert [row["event_rows"] for row in listed] == [len(first.records), len(second.records)]
    for log in (first, second):
        with Session.open(db, session_id=log.header["id"]) as session:
            assert session.format == "dsh" and session.id == log.header["id"]
            assert [message_to_original(m) for m in session.messages()] == reference_messages(log.expanded())
            assert [(e.type, e.seq, e.time) for e in session.events] == [(e["type"], e["seq"], e["time"]) for e in log.expanded()]
            with pytest.raises(SessionError, match="read-only"):
                session.append("turn/start", {"turn": 9})
    with pytest.raises(FileNotFoundError, match="no session 'missing'"):
        Session.open(db, session_id="missing")
    with pytest.raises(ValueError, match="session_id="):
        Session.open(db)  # many sessions: which one must be said


def test_the_store_is_chosen_by_the_files_first_bytes(tmp_path: Path) -> None:
    log = SCENARIOS["text_and_reasoning"]()
    plain, packed = _write(log, tmp_path, "a.jsonl"), _write(SCENARIOS["text_and_reasoning"](), tmp_path, "b.jsonl.zstd")
    db = tmp_path / "original.db"
    _sqlite_db(db, log)
    assert type(open_store(plain)) is DshJsonlStore and type(open_store(packed)) is DshJsonlStore
    assert type(open_store(db, session_id=log.header["id"])) is DshSqliteStore
    renamed = tmp_path / "compressed-but-named.jsonl"
    renamed.write_bytes(packed.read_bytes())
    assert type(open_store(renamed)) is DshJsonlStore
    with Session.open(renamed, read_only=True) as session:
        assert session.format == "dsh" and len(session.events) == len(log.expanded())
    assert type(open_store(tmp_path / "new.jsonl", format="dsh")) is DshJsonlStore
    Session.create(tmp_path / "dshkit.jsonl").close()
    Session.create(tmp_path / "dshkit.sqlite").close()
    assert type(open_store(tmp_path / "dshkit.jsonl")) is JsonlStore
    assert type(open_store(tmp_path / "dshkit.sqlite")) is SqliteStore
    with pytest.raises(ValueError, match="holds session"):  # one log per file: its header says whose
        Session.open(tmp_path / "dshkit.jsonl", session_id="x")
    with pytest.raises(ValueError, match="session_id= picks a session"):
        Session.open(store=JsonlStore(tmp_path / "dshkit.jsonl"), session_id="x")
    with pytest.raises(ValueError, match="format must be"):
        Session.create(tmp_path / "x.jsonl", format="json")
    with pytest.raises(ValueError, match=".jsonl or .jsonl.zstd"):
        Session.create(tmp_path / "x.sqlite", format="dsh")
    with pytest.raises(ValueError, match="writes the 'dshkit' format"):
        Session.create(store=JsonlStore(tmp_path / "y.jsonl"), format="dsh")
    with pytest.raises(FileExistsError):
        Session.create(plain, format="dsh")


def test_sqlite_source_seqs_round_trip() -> None:
    from dshkit.session.dsh.sqlite_store import decode_source_seqs

    for seqs in ([0], [5, 3, 900, 2, 2**40], list(range(30))):
        assert decode_source_seqs(encode_source_seqs(seqs)) == seqs


def test_tool_result_without_is_error_round_trips(tmp_path: Path) -> None:
    log = OriginalLog()
    log.event("turn/start", {"turn": 1})
    log.event("assistant/message", {"turn": 1, "step": 1, "message": {"role": "assistant", "id": "m1",
        "content": [{"type": "tool-call", "id": "c", "name": "n", "arguments": "{}"}],
        "source": {"kind": "model", "provider": "p", "model": "m", "replayState": {"sig": "abc"}}}}, surfaceOp="append")
    log.event("tool/result", {"turn": 1, "step": 1, "message": tool_result("c", "r", is_error=None)}, surfaceOp="append")
    log.event("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    src = log.write(tmp_path / "a.jsonl")
    with Session.open(src, read_only=True) as session:
        assert session.messages()[0].source["replay_state"] == {"sig": "abc"}
    convert_log(src, tmp_path / "b.jsonl")
    convert_log(tmp_path / "b.jsonl", tmp_path / "c.jsonl", format="dsh")
    assert _read_original(tmp_path / "c.jsonl")[1] == log.expanded()
    assert os.path.getsize(tmp_path / "c.jsonl") > 0 and user("x")["role"] == "user"


def test_the_convert_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dshkit.cli import main

    src = _write(SCENARIOS["parallel_tools"](), tmp_path, "src.jsonl.zstd")
    assert main(["log", "convert", str(src), str(tmp_path / "d.jsonl")]) == 0
    assert main(["log", "convert", str(tmp_path / "d.jsonl"), str(tmp_path / "o.jsonl"), "--format", "dsh"]) == 0
    assert capsys.readouterr().err == ""  # no progress bar when stderr is not a terminal
    assert _read_original(tmp_path / "o.jsonl")[1] == _read_original(src)[1]
    assert main(["log", "convert", str(src), str(tmp_path / "d.jsonl")]) == 1
    assert "already exists" in capsys.readouterr().err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_convert_command_shows_progress_on_a_terminal(tmp_path: Path) -> None:
    from dshkit.cli.log import convert

    log = SCENARIOS["parallel_tools"]()
    terminal = _Terminal()
    assert convert(str(_write(log, tmp_path, "src.jsonl")), str(tmp_path / "d.jsonl"), "dshkit", terminal) == 0
    total = len(log.expanded())
    assert terminal.getvalue().endswith(f"] {total}/{total} events\n") and "[" + "#" * 30 + "]" in terminal.getvalue()
