"""Never a crash: deep, huge or hostile inputs give an exception or a result, in a child process.

Each scenario runs in a fresh interpreter so that a native stack overflow or an abort is reported
as a failed test (with its exit status) instead of killing the whole test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def run_isolated(script: str, timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"child exited with {done.returncode}\nstdout:\n{done.stdout[-2000:]}\nstderr:\n{done.stderr[-2000:]}"
    )
    return done.stdout


def test_frozendicts_composed_far_deeper_than_the_freeze_limit() -> None:
    """If composing FrozenDicts can exceed 256 levels (reuse skips re-walking), every operation
    on the result must raise (ValueError or RecursionError) or succeed, never crash."""
    output = run_isolated(
        """
        import copy, pickle, sys
        from dshkit import FrozenDict, freeze, thaw, to_json, json_default, create_user_message
        value, twin = FrozenDict(), FrozenDict()
        try:
            for _ in range(50_000):
                value, twin = FrozenDict(k=value), FrozenDict(k=twin)
        except ValueError:
            # The depth limit also applies to composition: nothing deep exists to misbehave on.
            print("composition capped")
            raise SystemExit(0)
        results = []
        for name, op in [
            ("freeze", lambda: freeze(value)),
            ("freeze-list", lambda: freeze([value])),
            ("thaw", lambda: thaw(value)),
            ("to_json", lambda: to_json(value)),
            ("repr", lambda: repr(value)),
            ("eq", lambda: value == twin),
            ("pickle", lambda: pickle.dumps(value)),
            ("copy", lambda: copy.deepcopy(value)),
            ("message", lambda: create_user_message([{"type": "x", "v": value}], source={"kind": "user"}).to_json()),
        ]:
            try:
                op()
                results.append(name + ":ok")
            except (ValueError, RecursionError) as error:
                results.append(name + ":" + type(error).__name__)
        print(" ".join(results))
        """
    )
    assert "composition capped" in output or ("to_json:" in output and "thaw:" in output)


def test_hash_of_a_deeply_composed_frozendict_does_not_crash() -> None:
    """CPython hashes a tuple nested 100k deep without crashing; a FrozenDict must not do worse."""
    run_isolated(
        """
        nested = ()
        for _ in range(100_000):
            nested = (nested,)
        hash(nested)
        from dshkit import FrozenDict
        value = FrozenDict()
        try:
            for _ in range(100_000):
                value = FrozenDict(k=value)
        except ValueError:
            raise SystemExit(0)  # composition is capped by the depth limit
        try:
            hash(value)
        except RecursionError:
            pass
        """
    )


def test_depth_limit_on_a_small_thread_stack() -> None:
    """256 levels must fit on a 256 KiB thread stack (musl's default is 128 KiB, others 512 KiB+)."""
    output = run_isolated(
        """
        import threading
        from dshkit import freeze, thaw, to_json, from_json, create_user_message
        threading.stack_size(256 * 1024)
        def nested(levels):
            value = 0
            for i in range(levels):
                value = [value] if i % 2 else {"k": value}
            return value
        results = []
        def work():
            deep = nested(256)
            frozen = freeze(deep)
            assert thaw(frozen) == deep
            text = to_json(frozen)
            assert from_json(text) == frozen
            create_user_message([{"type": "x", "v": nested(250)}], source={"kind": "user"}).to_json()
            for bad in (nested(257), nested(5_000)):
                try:
                    freeze(bad)
                except ValueError:
                    pass
            try:
                from_json("[" * 5_000 + "]" * 5_000)
            except ValueError:
                pass
            results.append("done")
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        print(results)
        """
    )
    assert "done" in output


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_parsing_a_million_openers_is_refused_not_a_crash(opener: str) -> None:
    run_isolated(
        f"""
        from dshkit import from_json
        try:
            from_json({opener!r} * 1_000_000)
        except ValueError:
            pass
        else:
            raise SystemExit("accepted")
        """
    )


def test_large_flat_values() -> None:
    output = run_isolated(
        """
        from dshkit import freeze, thaw, to_json, from_json
        rows = [{"id": i, "text": "x" * 10} for i in range(200_000)]
        frozen = freeze(rows)
        assert len(frozen) == 200_000
        assert from_json(to_json(frozen)) == frozen
        big = "é" * 5_000_000
        assert from_json(to_json(big)) == big
        wide = freeze({f"k{i}": i for i in range(100_000)})
        assert thaw(wide) == {f"k{i}": i for i in range(100_000)}
        print("ok")
        """
    )
    assert output.strip() == "ok"
