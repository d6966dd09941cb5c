"""The shipped stubs and `py.typed` give users precise types (checked with mypy, as a user would)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mypy")

USES = """
from dshkit import (
    FrozenDict, Message, MessageId, create_assistant_message, create_tool_result_message,
    create_user_message, freeze, freeze_message, new_message_id, thaw, to_json,
)

message = create_user_message("hi", source={"kind": "user"})
reveal_type(message)
reveal_type(message.id)
reveal_type(message.content)
reveal_type(message.source)
reveal_type(new_message_id())
reveal_type(freeze_message(message))
reveal_type(message.with_content("x"))
reveal_type(Message.from_json(message.to_json()))
reveal_type(create_tool_result_message("c", "r", is_error=True))
reveal_type(create_assistant_message("a", provider="p", model="m", replay_state={"s": 1}))
reveal_type(to_json(message))
block: FrozenDict[object] = message.content[0]
kind: str = message.source["kind"]
"""

MISUSES = """
from dshkit import MessageId, create_assistant_message, create_message, create_user_message

message = create_user_message("hi", source={"kind": "user"})
message.id = MessageId("forged")
create_user_message("x", source={"kind": "user"}, id="m")
create_user_message("x")
create_assistant_message("x", provider="p", model="m", source={"kind": "model"})
create_message(role="tool", content="x", source={"kind": "user"})
"""


def run_mypy(code: str, tmp_path: Path) -> list[str]:
    module = tmp_path / "snippet.py"
    module.write_text(textwrap.dedent(code))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", str(module)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=240,
    )
    return done.stdout.splitlines()


def test_types_revealed_to_users(tmp_path: Path) -> None:
    lines = run_mypy(USES, tmp_path)
    revealed = [
        line.split("Revealed type is ", 1)[1].strip('"').replace("builtins.", "")
        for line in lines
        if "Revealed type" in line
    ]
    errors = [line for line in lines if ": error:" in line]
    assert not errors, errors
    assert revealed == [
        "dshkit._core.Message",
        "dshkit.llm.MessageId",
        "tuple[dshkit._core.FrozenDict[Any], ...]",
        "dshkit._core.FrozenDict[Any]",
        "dshkit.llm.MessageId",
        "dshkit._core.Message",
        "dshkit._core.Message",
        "dshkit._core.Message",
        "dshkit._core.Message",
        "dshkit._core.Message",
        "str",
    ], lines


def test_misuse_is_reported_by_the_type_checker(tmp_path: Path) -> None:
    lines = run_mypy(MISUSES, tmp_path)
    error_lines = sorted({int(line.split(":")[1]) for line in lines if ": error:" in line})
    # One error on each misuse line (5..9 in the dedented snippet).
    assert error_lines == [5, 6, 7, 8, 9], lines
