"""The release artifacts in `dist/` (built by `make wheel`, which `make test` runs before pytest).

The wheel is installed into a fresh virtual environment and used from there, far from the
source tree, so a missing file in the wheel cannot hide behind the editable development install.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "dist"

pytestmark = pytest.mark.slow


def compatible_wheel() -> Path | None:
    """The dshkit wheel in dist/ that this interpreter can install, if any."""
    supported = list(sys_tags())
    candidates = []
    for wheel in sorted(DIST.glob("dshkit-*.whl")):
        _, _, _, tags = parse_wheel_filename(wheel.name)
        ranks = [supported.index(tag) for tag in tags if tag in supported]
        if ranks:
            candidates.append((min(ranks), wheel))
    return min(candidates)[1] if candidates else None


def require_wheel() -> Path:
    if not any(DIST.glob("dshkit-*.whl")):
        pytest.skip("dist/ holds no dshkit wheel: run `make wheel` (`make test` does it first)")
    wheel = compatible_wheel()
    if wheel is None:
        pytest.skip(f"no wheel in dist/ matches this interpreter ({sys.implementation.cache_tag})")
    return wheel


def isolated_env() -> dict[str, str]:
    """The environment without anything that would let the source tree leak into imports."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "VIRTUAL_ENV"}
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def interpreter_for(wheel: Path) -> str | None:
    """A Python on this machine that the wheel is built for (PATH or pyenv), if any."""
    _, _, _, tags = parse_wheel_filename(wheel.name)
    versions = {tag.interpreter[2:] for tag in tags if tag.interpreter.startswith("cp")}
    for version in sorted(versions):
        name = f"python{version[0]}.{version[1:]}"
        found = subprocess.run(
            [name, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True
        )
        if found.returncode == 0 and found.stdout.strip():
            return found.stdout.strip()
        pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
        candidates = sorted(pyenv.glob(f"{version[0]}.{version[1:]}.*/bin/{name}"))
        if candidates:
            return str(candidates[-1])
    return None


def install_into_fresh_venv(wheel: Path, python: str, home: Path, *, extra: str | None = None) -> Path:
    """A fresh venv of `python` with `wheel` installed (no dependencies, no index): its python.
    With `extra`, the wheel is installed with that extra and its dependencies, from the index."""
    # This interpreter's pip installs into the new venv (`pip --python`): much faster than
    # bootstrapping pip into it, and just as isolated.
    outer_pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0
    subprocess.run(
        [python, "-m", "venv", "--clear", *([] if not outer_pip else ["--without-pip"]), str(home / "venv")],
        check=True,
        env=isolated_env(),
        timeout=300,
    )
    target = home / "venv" / ("Scripts" if os.name == "nt" else "bin") / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(target)] if outer_pip else [str(target), "-m", "pip"]
    requirement = [f"{wheel}[{extra}]"] if extra else ["--no-index", "--no-deps", str(wheel)]
    subprocess.run(
        [*pip, "install", "--quiet", "--disable-pip-version-check", *requirement],
        check=True,
        cwd=home,
        env=isolated_env(),
        timeout=300,
    )
    return target


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This interpreter's wheel installed into a fresh venv: its python."""
    return install_into_fresh_venv(require_wheel(), sys.executable, tmp_path_factory.mktemp("wheel-venv"))


def run_in(python: Path, code: str, cwd: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=isolated_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_wheel_is_per_interpreter_not_abi3() -> None:
    wheel = require_wheel()
    _, _, _, tags = parse_wheel_filename(wheel.name)
    assert all(tag.abi != "abi3" for tag in tags), wheel.name
    assert any(tag.interpreter == sys.implementation.cache_tag.replace("cpython-", "cp") for tag in tags)


def test_the_wheel_ships_the_extension_stubs_and_marker() -> None:
    wheel = require_wheel()
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(metadata_name).decode()
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    assert any(n.startswith("dshkit/_core") and n.endswith(suffix) for n in names), sorted(names)
    for required in (
        "dshkit/__init__.py", "dshkit/llm.py", "dshkit/_core.pyi", "dshkit/py.typed",
        "dshkit/viewer/assets/viewer.js", "dshkit/viewer/assets/viewer.css",
    ):
        assert required in names, required
    assert "Name: dshkit" in metadata
    assert "Requires-Python: >=3.10" in metadata
    assert not any(n.startswith(("tests/", "rust/", "benches/")) for n in names)


def test_the_installed_wheel_imports_and_creates_a_message(installed: Path, tmp_path: Path) -> None:
    output = run_in(
        installed,
        """
        import json, pathlib, sys
        import dshkit
        package = pathlib.Path(dshkit.__file__).resolve().parent
        assert pathlib.Path(sys.prefix).resolve() in package.parents, package
        message = dshkit.create_user_message("hello from the wheel", source={"kind": "user"})
        again = dshkit.Message.from_json(message.to_json())
        assert again == message and again.id == message.id
        assert dshkit.freeze_message(message) is message
        assert (package / "py.typed").is_file() and (package / "_core.pyi").is_file()
        print(json.dumps({"id": message.id, "text": message.text, "version": dshkit.__version__}))
        """,
        cwd=tmp_path,
    )
    result = json.loads(output.strip().splitlines()[-1])
    assert re.fullmatch(r"[0-7][0-9A-HJKMNP-TV-Z]{25}", result["id"])
    assert result["text"] == "hello from the wheel"
    assert result["version"] == "0.1.0"


def test_the_installed_command_line_starts(installed: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(installed), "-m", "dshkit", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=isolated_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "demo" in done.stdout
    script = installed.parent / ("dshkit.exe" if os.name == "nt" else "dshkit")
    assert script.exists(), "the `dshkit` console script was not installed"


def test_the_sdist_holds_what_a_build_needs() -> None:
    sdists = sorted(DIST.glob("dshkit-*.tar.gz"))
    if not sdists:
        pytest.skip("dist/ holds no dshkit sdist: run `make wheel`")
    with tarfile.open(sdists[-1]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for required in (
        "Cargo.toml",
        "Cargo.lock",
        "pyproject.toml",
        "rust/lib.rs",
        "python/dshkit/__init__.py",
        "python/dshkit/_core.pyi",
        "python/dshkit/py.typed",
        "python/dshkit/viewer/assets/viewer.js",
    ):
        assert required in names, required


def built_wheels() -> list[Path]:
    return sorted(DIST.glob("dshkit-*.whl"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="manylinux tags are Linux-only")
def test_every_wheel_is_manylinux2014_and_stripped() -> None:
    wheels = built_wheels()
    if not wheels:
        pytest.skip("dist/ holds no dshkit wheel: run `make wheels` (`make test` does it first)")
    pytest.importorskip("auditwheel", reason="auditwheel is installed by `make wheels`")
    for wheel in wheels:
        shown = subprocess.run(
            [sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True, timeout=120
        )
        assert shown.returncode == 0, shown.stderr
        # auditwheel names the most compatible tag the wheel's symbol versions allow.
        assert '"manylinux_2_17_x86_64"' in " ".join(shown.stdout.split()), shown.stdout
        assert "manylinux2014_x86_64" in wheel.name, wheel.name
        with zipfile.ZipFile(wheel) as archive:
            extension = next(n for n in archive.namelist() if n.startswith("dshkit/_core") and n.endswith(".so"))
            data = archive.read(extension)
        assert data[:4] == b"\x7fELF"
        assert b".symtab" not in data, f"{wheel.name}: the extension is not stripped"


def test_each_wheel_installs_and_runs_on_its_interpreter(tmp_path: Path) -> None:
    wheels = built_wheels()
    if not wheels:
        pytest.skip("dist/ holds no dshkit wheel: run `make wheels` (`make test` does it first)")
    ran = []
    for wheel in wheels:
        python = interpreter_for(wheel)
        if python is None:
            continue
        home = tmp_path / wheel.name
        home.mkdir()
        # The README's first agent has a typed tool and a typed output: the `typed` extra (pydantic).
        target = install_into_fresh_venv(wheel, python, home, extra="typed")
        output = run_in(target, readme_first_example(), cwd=home)
        assert output.splitlines()[-1] == "ok", output
        ran.append(wheel.name)
    assert ran, "no wheel in dist/ matches an interpreter on this machine"


def readme_first_example() -> str:
    """The README's first Python block as a plain program: a line documented to raise
    (`# !! Error: ...` under it) must raise that error; it ends by printing "ok"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    code = text.split("```python\n", 1)[1].split("\n```", 1)[0]
    lines = code.splitlines()
    program = []
    for statement in ast.parse(code).body:
        # A decorated definition starts at its first decorator (the node's own lineno is the def's).
        first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])
        source = "\n".join(lines[first - 1 : statement.end_lineno])
        following = lines[statement.end_lineno] if statement.end_lineno and statement.end_lineno < len(lines) else ""
        raised = re.match(r"\s*# !! (\w+)", following)
        if raised:
            error = raised.group(1)
            source = (
                f"try:\n{textwrap.indent(source, '    ')}\nexcept {error}:\n    pass\n"
                f"else:\n    raise AssertionError('expected {error}')"
            )
        program.append(source)
    program.append('print("ok")')
    return "\n".join(program)
