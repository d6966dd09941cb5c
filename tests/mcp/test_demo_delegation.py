"""The demo's subagent-with-an-MCP-tool part: real server, real logs, the links and ids it prints."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dshkit.cli.demo_delegation import run_delegation
from dshkit.session import Session, children_of, delegation_of


def test_the_demo_part_runs_a_subagent_with_the_mcp_tool_and_prints_the_links(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "delegation"
    asyncio.run(run_delegation(folder))
    out = capsys.readouterr().out
    assert "its tools: ['mcp__units__to_celsius']" in out
    assert "calls mcp__units__to_celsius" in out and "(tool): 37.0" in out
    assert "parent's answer: That is 37 °C: no fever." in out
    with Session.open(folder / "parent.jsonl", read_only=True) as parent:
        child_id = children_of(parent)["call_convert"]
        with Session.open(folder / f"{child_id}.jsonl", read_only=True) as child:
            assert delegation_of(child) == (parent.id, "call_convert", 1)
            assert f"header names parent …{parent.id[-6:]}, call call_convert, depth 1" in out
