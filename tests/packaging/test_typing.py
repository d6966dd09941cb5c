"""The shipped stubs and `py.typed` give users precise types (checked with mypy, as a user would)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import dshkit

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


# -- the README's examples, and the types issue 14 fixed, under mypy --strict and pyright --strict --

README = Path(__file__).resolve().parents[2] / "README.md"
README_BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)

TYPE_FIXES = """
import asyncio
from typing import Literal

from dshkit import Message, create_user_message
from dshkit.agent import Agent, AgentStatus, Allow, Ask, PendingApproval, Tool, ToolContext
from dshkit.agent.tool_hooks import Decision
from dshkit.models import ScriptedModel


def add(arguments: dict[str, int], ctx: ToolContext) -> int:  # a synchronous body
    return arguments["a"] + arguments["b"]


async def add_later(arguments: dict[str, int], ctx: ToolContext) -> int:
    return arguments["a"] + arguments["b"]


tools = [Tool("add", "Add.", {"type": "object"}, add), Tool("add_later", "Add.", {"type": "object"}, add_later)]


def role_of(message: Message) -> str:
    match message:
        case Message(id, "user", content, source):
            return f"{id} {len(content)} {source['kind']}"
        case _:
            return message.role


async def main() -> None:
    agent = Agent(ScriptedModel(["ok"]), tools=tools)
    status: Literal["idle", "running", "awaiting_approval"] = agent.status
    waiting: list[PendingApproval] = agent.pending_approvals()
    asked: Decision = Ask("why") if waiting else Allow()
    other: AgentStatus = "idle"
    print(status == other, asked, role_of(create_user_message("hi", source={"kind": "user"})))
    await agent.close()


asyncio.run(main())
"""


def write_snippets(tmp_path: Path, snippets: dict[str, str]) -> list[Path]:
    paths = []
    for name, code in snippets.items():
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(code))
        paths.append(path)
    return paths


def readme_snippets() -> dict[str, str]:
    # `python no-run` illustrations do not match the pattern: they are not programs.
    return {f"readme_{index}": code for index, code in enumerate(README_BLOCKS, 1)}


def test_the_readme_has_examples_to_check() -> None:
    assert len(README_BLOCKS) >= 5
    assert any("case Message(id, \"user\", content, source)" in code for code in README_BLOCKS)


def test_readme_examples_and_type_fixes_pass_mypy_strict(tmp_path: Path) -> None:
    paths = write_snippets(tmp_path, {**readme_snippets(), "type_fixes": TYPE_FIXES})
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
         *map(str, paths)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def pyright_command() -> list[str] | None:
    """How to run pyright here: its PyPI package (`pip install pyright[nodejs]`) or one on PATH."""
    try:
        import pyright  # noqa: F401
    except ImportError:
        found = shutil.which("pyright")
        return [found] if found else None
    return [sys.executable, "-m", "pyright"]


def test_readme_examples_and_type_fixes_pass_pyright_strict(tmp_path: Path) -> None:
    command = pyright_command()
    if command is None:
        pytest.skip("pyright is not installed (the test extra installs pyright[nodejs])")
    paths = write_snippets(tmp_path, {**readme_snippets(), "type_fixes": TYPE_FIXES})
    (tmp_path / "pyrightconfig.json").write_text(
        # The examples show values as bare expressions (`frozen  # -> ...`), as in a REPL.
        json.dumps({"typeCheckingMode": "strict", "pythonVersion": "3.10", "reportUnusedExpression": False})
    )
    done = subprocess.run(
        [*command, "--pythonpath", sys.executable, "--project", str(tmp_path), *map(str, paths)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 errors" in done.stdout, done.stdout


def test_the_library_itself_passes_mypy_strict(tmp_path: Path) -> None:
    # The annotations users read (and the stubs build on) hold for the code behind them too.
    package = Path(dshkit.__file__).parent
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(package)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
