"""Real threads: freezing shared inputs, hashing shared FrozenDicts, creating messages, racing mutation."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from dshkit import (
    FrozenDict,
    create_user_message,
    freeze,
    freeze_message,
    from_json,
    thaw,
    to_json,
)

THREADS = 8


def run_threads(work: Callable[[int], None], count: int = THREADS) -> None:
    """Start `count` threads at once (barrier), join them all, re-raise the first failure."""
    start = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(slot: int) -> None:
        try:
            start.wait()
            work(slot)
        except BaseException as error:  # noqa: BLE001 - surfaced below
            errors.append(error)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def shared_tree() -> dict[str, Any]:
    return {
        "rows": [{"id": i, "name": f"row {i}", "score": i / 3, "tags": ["a", "b"], "ok": i % 2 == 0} for i in range(40)],
        "meta": {"deep": {"deeper": [[1, 2], {"x": None}]}},
    }


def test_freezing_one_shared_input_from_8_threads() -> None:
    tree = shared_tree()
    reference = freeze(tree)
    results: list[list[Any]] = [[] for _ in range(THREADS)]

    def work(slot: int) -> None:
        for _ in range(300):
            results[slot].append(freeze(tree))

    run_threads(work)
    for per_thread in results:
        assert len(per_thread) == 300
        for frozen in per_thread:
            assert frozen == reference
            assert frozen is not reference  # a plain input is copied each time
    assert thaw(reference) == tree


def test_refreezing_one_shared_frozen_tree_from_8_threads() -> None:
    reference = freeze(shared_tree())
    same: list[bool] = []

    def work(_: int) -> None:
        same.append(all(freeze(reference) is reference for _ in range(2_000)))

    run_threads(work)
    assert same == [True] * THREADS


def test_hashing_a_fresh_shared_frozendict_from_8_threads() -> None:
    for round_number in range(100):
        shared = freeze({f"k{i}": [i, {"n": round_number}] for i in range(30)})
        expected = hash(freeze({f"k{i}": [i, {"n": round_number}] for i in range(30)}))
        seen: list[int] = []

        def work(_: int) -> None:
            seen.append(hash(shared))

        run_threads(work)
        assert seen == [expected] * THREADS


def test_lookups_in_a_fresh_large_frozendict_from_8_threads() -> None:
    """A FrozenDict of more than 8 entries builds its lookup table on first use: threads that race
    to build it all get right answers, and missing keys stay missing."""
    for _ in range(20):
        shared = FrozenDict({f"key{i}": i for i in range(100)})

        def look_up(slot: int) -> None:
            for i in range(100):
                assert shared[f"key{(i + slot) % 100}"] == (i + slot) % 100
                assert f"absent{i}" not in shared
            assert shared.get("absent") is None

        run_threads(look_up)


def test_comparing_and_serialising_shared_values_from_8_threads() -> None:
    shared = freeze(shared_tree())
    twin = freeze(shared_tree())
    text = to_json(shared)
    failures: list[str] = []

    def work(_: int) -> None:
        for _ in range(200):
            if shared != twin:
                failures.append("eq")
            if to_json(shared) != text:
                failures.append("to_json")
            if from_json(text) != shared:
                failures.append("from_json")

    run_threads(work)
    assert not failures


def test_creating_messages_from_8_threads() -> None:
    per_thread = 3_000
    made: list[list[Any]] = [[] for _ in range(THREADS)]
    source = {"kind": "user"}
    content = [{"type": "text", "text": "shared"}, {"type": "custom", "data": [1, 2, {"k": "v"}]}]

    def work(slot: int) -> None:
        for _ in range(per_thread):
            made[slot].append(create_user_message(content, source=source))

    run_threads(work)
    all_ids = [m.id for ms in made for m in ms]
    assert len(set(all_ids)) == THREADS * per_thread
    for ms in made:
        ids = [m.id for m in ms]
        assert ids == sorted(ids)
    first = made[0][0]
    assert all(m.content == first.content and m.source == first.source for ms in made for m in ms)
    assert all(freeze_message(m) is m for m in made[3])


def test_freezing_while_another_thread_mutates_the_input_never_crashes() -> None:
    """Each freeze sees some consistent snapshot or raises a clear error; the process survives."""
    data: dict[str, Any] = {"list": list(range(50)), "map": {f"k{i}": i for i in range(50)}}
    stop = threading.Event()
    outcomes: list[str] = []

    def mutate() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            data["list"].append(i)
            if len(data["list"]) > 200:
                del data["list"][:100]
            data["map"][f"n{i % 300}"] = [i]
            data["map"].pop(f"n{(i + 150) % 300}", None)

    def freeze_repeatedly(_: int) -> None:
        for _ in range(300):
            try:
                frozen = freeze(data)
            except (RuntimeError, ValueError, TypeError) as error:
                outcomes.append(type(error).__name__)
                continue
            assert type(frozen) is FrozenDict
            assert all(type(v) is int for v in frozen["list"])
            outcomes.append("ok")

    mutator = threading.Thread(target=mutate)
    mutator.start()
    try:
        run_threads(freeze_repeatedly, count=4)
    finally:
        stop.set()
        mutator.join()
    assert outcomes.count("ok") > 0
