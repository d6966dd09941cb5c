"""Every Python block of README.md and docs/*.md runs by itself and prints what the text says.

The conventions (docs/decisions/docs-that-run.md):
- A ```python block runs, by itself, in a fresh namespace and a scratch working directory.
- ```python no-run marks an illustration (network, API keys, a fragment): it is only compiled.
- `expression  # -> expected` checks ``repr(value)`` (or, for a call that returns None such as
  `print`, what it printed) against `expected`; `...` in `expected` stands for any text.
- `statement  # !! Error: message` (or a `# !! ...` comment line right after the statement,
  continued by comment lines indented by two or more spaces) checks that the statement raises
  that exception with that message (whitespace-insensitive, `...` for any text).
- An ```output block right after a python block is the block's whole standard output.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass
class Block:
    path: Path
    line: int  # the 1-based line of the block's first code line
    code: str
    runs: bool
    output: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


@dataclass
class Check:
    kind: str  # "->" or "!!"
    expected: str
    lines: list[int] = field(default_factory=list)


def read_blocks(path: Path) -> list[Block]:
    """Every ```python block of `path`, with its line, run flag and following ```output block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        info = lines[index].strip()
        if info.startswith("```python"):
            flags = info[len("```python"):].split()
            end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
            block = Block(path, index + 2, "\n".join(lines[index + 1 : end]) + "\n", "no-run" not in flags)
            after = end + 1
            while after < len(lines) and not lines[after].strip():
                after += 1
            if after < len(lines) and lines[after].strip() == "```output":
                close = next(i for i in range(after + 1, len(lines)) if lines[i].strip() == "```")
                block.output = "\n".join(lines[after + 1 : close]) + "\n"
                end = close
            blocks.append(block)
            index = end + 1
            continue
        index += 1
    return blocks


def matches(expected: str, actual: str) -> bool:
    """`actual` equals `expected` up to runs of whitespace, `...` standing for any text."""
    squeeze = lambda text: " ".join(text.split())  # noqa: E731
    pattern = ".*?".join(re.escape(part) for part in squeeze(expected).split("..."))
    return re.fullmatch(pattern, squeeze(actual), re.S) is not None


def _comments(code: str) -> dict[int, str]:
    found: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string
    return found


def _checks(statement: ast.stmt, code_lines: list[str], comments: dict[int, str]) -> Check | None:
    end = statement.end_lineno or statement.lineno
    trailing = comments.get(end, "")
    marker = re.search(r"(?:^|\s)#\s*(->|!!)\s?(.*)$", trailing)
    if marker:
        return Check(marker.group(1), marker.group(2).strip(), [end])
    following = end + 1
    if following <= len(code_lines) and code_lines[following - 1].lstrip().startswith("# !!"):
        check = Check("!!", code_lines[following - 1].lstrip()[4:].strip(), [following])
        following += 1
        while following <= len(code_lines) and re.match(r"\s*#  +\S", code_lines[following - 1]):
            check.expected += " " + code_lines[following - 1].lstrip()[1:].strip()
            following += 1
        return check
    return None


def run_block(block: Block, namespace: dict[str, object]) -> str:
    """Run `block` statement by statement, checking each claim; returns its standard output."""
    tree = ast.parse(block.code, block.where)
    code_lines = block.code.splitlines()
    comments = _comments(block.code)
    printed = io.StringIO()
    filename = str(block.path)
    for statement in tree.body:
        check = _checks(statement, code_lines, comments)
        module = ast.Module(body=[statement], type_ignores=[])
        ast.increment_lineno(module, block.line - 1)
        where = f"{block.path.relative_to(ROOT)}:{statement.lineno + block.line - 1}"
        if check is not None and check.kind == "->":
            assert isinstance(statement, ast.Expr), f"{where}: '# ->' follows an expression, not a statement"
            expression = ast.Expression(body=statement.value)
            ast.increment_lineno(expression, block.line - 1)
            captured = io.StringIO()
            with contextlib.redirect_stdout(captured):
                value = eval(compile(expression, filename, "eval"), namespace)
            printed.write(captured.getvalue())
            actual = captured.getvalue().strip() if value is None else repr(value)
            assert matches(check.expected, actual), f"{where}: claimed {check.expected!r}, got {actual!r}"
            continue
        compiled = compile(module, filename, "exec")
        if check is not None:  # "!!": the statement must raise what the comment says
            try:
                with contextlib.redirect_stdout(printed):
                    exec(compiled, namespace)
            except Exception as error:  # noqa: BLE001 - any exception is compared with the claim
                actual = f"{type(error).__name__}: {error}"
                assert matches(check.expected, actual), f"{where}: claimed {check.expected!r}, raised {actual!r}"
            else:
                raise AssertionError(f"{where}: claimed {check.expected!r}, but nothing was raised")
            continue
        with contextlib.redirect_stdout(printed):
            exec(compiled, namespace)
    return printed.getvalue()


BLOCKS = [block for document in DOCUMENTS for block in read_blocks(document)]


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.runs], ids=lambda b: b.where)
def test_block_runs_and_prints_what_it_claims(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a block that writes files writes them here
    printed = run_block(block, {"__name__": "__main__"})
    if block.output is not None:
        assert matches(block.output, printed), f"{block.where}: claimed output {block.output!r}, printed {printed!r}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if not b.runs], ids=lambda b: b.where)
def test_illustrations_are_valid_python(block: Block) -> None:
    compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)  # notebook-style await is fine


def test_every_document_is_read_and_most_blocks_run() -> None:
    assert {document.name for document in DOCUMENTS} >= {"README.md", "session.md", "agent.md", "models.md", "interop.md"}
    assert len([b for b in BLOCKS if b.runs]) >= 12


def test_a_wrong_claim_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 2\nx + 1  # -> 4\n```\n\n```python\nint('z')  # !! ValueError: something else\n```\n")
    wrong_value, wrong_error = read_blocks(page)
    for block in (wrong_value, wrong_error):
        block.path = ROOT / "page.md"  # shown relative to the repository
        with pytest.raises(AssertionError, match="claimed"):
            run_block(block, {})


def test_claims_match_with_ellipsis_and_any_spacing() -> None:
    assert matches("'01...'", "'01ABC'") and matches("a  b", "a b") and not matches("'01...'", "'02ABC'")
