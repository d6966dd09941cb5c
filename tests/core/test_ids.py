"""Message ids: monotonic ULIDs, strictly increasing per process, across threads, fork-safe."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
import queue
import re
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest

import dshkit
from dshkit import new_message_id
from dshkit.llm import encode_ulid
from dshkit.session._repair import closer_message_id

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ULID_PATTERN = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
RANDOM_BITS = 80
RANDOM_MASK = (1 << RANDOM_BITS) - 1


def decode(ulid: str) -> int:
    """The 128-bit value of a ULID string."""
    value = 0
    for char in ulid:
        value = value * 32 + CROCKFORD.index(char)
    return value


def time_part_ms(ulid: str) -> int:
    return decode(ulid) >> RANDOM_BITS


def random_part(ulid: str) -> int:
    return decode(ulid) & RANDOM_MASK


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def assert_strictly_increasing(ids: list[str]) -> None:
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(ids, ids[1:])) if not a < b]
    assert not bad, f"{len(bad)} non-increasing neighbours, first: {bad[:3]}"


# --- shape -----------------------------------------------------------------------------------


def test_an_id_is_a_plain_26_character_str() -> None:
    minted = new_message_id()
    assert type(minted) is str
    assert len(minted) == 26
    assert ULID_PATTERN.fullmatch(minted), minted


def test_ids_use_only_the_crockford_alphabet_and_a_first_char_at_most_7() -> None:
    ids = [new_message_id() for _ in range(2_000)]
    assert set("".join(ids)) <= set(CROCKFORD)
    assert not set("".join(ids)) & set("ILOU")
    assert all(i[0] <= "7" for i in ids)
    assert all(ULID_PATTERN.fullmatch(i) for i in ids)


def test_the_time_part_decodes_to_now() -> None:
    before = now_ms()
    minted = new_message_id()
    after = now_ms()
    # Slack for a monotonic state that ran ahead (random-part overflow) or a clock adjustment.
    assert before - 2_000 <= time_part_ms(minted) <= after + 2_000


def test_ids_fit_in_128_bits() -> None:
    for minted in (new_message_id() for _ in range(100)):
        assert decode(minted) < 1 << 128


# --- monotonic in one thread -----------------------------------------------------------------


def test_100k_ids_in_a_loop_are_strictly_increasing_and_unique() -> None:
    ids = [new_message_id() for _ in range(100_000)]
    assert_strictly_increasing(ids)
    assert len(set(ids)) == len(ids)
    # String order is numeric order (fixed width, alphabet sorted by value).
    values = [decode(i) for i in ids]
    assert values == sorted(values)
    assert len(set(values)) == len(values)


def test_within_one_millisecond_the_random_part_is_incremented() -> None:
    """Pinned: monotonic mode adds exactly 1 to the 80-bit random part within a millisecond."""
    ids = [new_message_id() for _ in range(20_000)]
    same_ms = [(a, b) for a, b in zip(ids, ids[1:]) if time_part_ms(a) == time_part_ms(b)]
    assert same_ms, "20k ids never shared a millisecond"
    for a, b in same_ms:
        assert decode(b) == decode(a) + 1, (a, b)


def test_a_new_millisecond_draws_fresh_randomness() -> None:
    firsts: dict[int, str] = {}
    previous = new_message_id()
    while len(firsts) < 40:
        time.sleep(0.0015)
        minted = new_message_id()
        assert minted > previous
        previous = minted
        firsts.setdefault(time_part_ms(minted), minted)
    randoms = [random_part(i) for i in firsts.values()]
    assert len(set(randoms)) == len(randoms)
    # Full 80-bit randomness: some draws have the top random bit set, some not.
    assert any(r >> (RANDOM_BITS - 1) for r in randoms)
    assert not all(r >> (RANDOM_BITS - 1) for r in randoms)


def test_ids_minted_later_sort_later_across_milliseconds() -> None:
    first = new_message_id()
    time.sleep(0.01)
    second = new_message_id()
    assert first < second
    assert time_part_ms(second) >= time_part_ms(first)


# --- monotonic across threads ----------------------------------------------------------------


def test_8_threads_minting_20k_each_get_unique_increasing_ids() -> None:
    threads_count, per_thread = 8, 20_000
    start = threading.Barrier(threads_count)
    results: list[list[str]] = [[] for _ in range(threads_count)]

    def mint(slot: int) -> None:
        start.wait()
        out = results[slot]
        for _ in range(per_thread):
            out.append(new_message_id())

    threads = [threading.Thread(target=mint, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    merged = [i for ids in results for i in ids]
    assert len(merged) == threads_count * per_thread
    assert len(set(merged)) == len(merged), "two threads minted the same id"
    for ids in results:
        assert_strictly_increasing(ids)
    # The global string sort agrees with the numeric order and keeps each thread's order.
    ordered = sorted(merged)
    assert [decode(i) for i in ordered] == sorted(decode(i) for i in merged)
    position = {minted: n for n, minted in enumerate(ordered)}
    for ids in results:
        positions = [position[i] for i in ids]
        assert positions == sorted(positions)


def test_an_id_minted_after_seeing_another_threads_id_is_greater() -> None:
    """Process-wide monotonicity: happens-before across threads implies a greater id."""
    rounds = 5_000
    to_worker: queue.Queue[str | None] = queue.Queue()
    to_main: queue.Queue[str] = queue.Queue()
    violations: list[tuple[str, str]] = []

    def worker() -> None:
        while (seen := to_worker.get()) is not None:
            minted = new_message_id()
            if not minted > seen:
                violations.append((seen, minted))
            to_main.put(minted)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        for _ in range(rounds):
            mine = new_message_id()
            to_worker.put(mine)
            theirs = to_main.get(timeout=30)
            after = new_message_id()
            if not (mine < theirs < after):
                violations.append((mine, theirs))
    finally:
        to_worker.put(None)
        thread.join()
    assert not violations, violations[:3]


# --- fork safety -----------------------------------------------------------------------------


def _child_mints_and_exits(write_fd: int, count: int) -> None:
    """Runs in a forked child: mint `count` ids, write them to the pipe, never return."""
    code = 1
    try:
        ids = [new_message_id() for _ in range(count)]
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write("\n".join(ids).encode("ascii"))
        code = 0
    finally:
        os._exit(code)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_children_and_parent_never_mint_the_same_id() -> None:
    count, children_per_round, rounds = 5_000, 3, 4
    all_ids: list[str] = []
    for _ in range(rounds):
        # Warm the state right before forking: every child inherits the same "last id".
        all_ids.append(new_message_id())
        pipes: list[tuple[int, int]] = []
        for _ in range(children_per_round):
            read_fd, write_fd = os.pipe()
            with warnings.catch_warnings():
                # 3.12+ warns when forking a process with threads; this test forks on purpose.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                _child_mints_and_exits(write_fd, count)
            os.close(write_fd)
            pipes.append((pid, read_fd))
        parent_ids = [new_message_id() for _ in range(count)]
        assert_strictly_increasing(parent_ids)
        all_ids.extend(parent_ids)
        for pid, read_fd in pipes:
            with os.fdopen(read_fd, "rb") as pipe:
                child_ids = pipe.read().decode("ascii").split("\n")
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            assert len(child_ids) == count
            assert all(ULID_PATTERN.fullmatch(i) for i in child_ids)
            assert_strictly_increasing(child_ids)
            all_ids.extend(child_ids)
    assert len(set(all_ids)) == len(all_ids), "a forked child repeated an id"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_within_the_same_millisecond_does_not_continue_the_parents_sequence() -> None:
    """A small process forks fast enough that the child often mints in the parent's millisecond,
    where an inherited "last id" would make child and parent both mint last + 1."""
    script = textwrap.dedent(
        """
        import os
        from dshkit import new_message_id
        same_ms = collisions = 0
        for _ in range(300):
            read_fd, write_fd = os.pipe()
            before = new_message_id()
            pid = os.fork()
            if pid == 0:
                os.write(write_fd, new_message_id().encode())
                os._exit(0)
            parent_next = new_message_id()
            os.close(write_fd)
            child_first = os.read(read_fd, 26).decode()
            os.close(read_fd)
            os.waitpid(pid, 0)
            same_ms += child_first[:10] == before[:10]  # the first 10 characters are the time part
            collisions += child_first == parent_next
        print(same_ms, collisions)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    same_ms, collisions = map(int, done.stdout.split())
    assert collisions == 0
    if same_ms == 0:
        pytest.skip("no fork landed in the parent's millisecond on this machine: nothing was exercised")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_raw_libc_fork_that_skips_register_at_fork_still_gives_the_child_fresh_ids() -> None:
    """Issue 9: a fork that bypasses `os.register_at_fork` (ctypes `libc.fork`, a C extension)
    must not let the child continue the parent's sequence: the core resets itself natively."""
    script = textwrap.dedent(
        """
        import ctypes, os
        from dshkit import new_message_id
        libc = ctypes.CDLL(None, use_errno=True)
        duplicates = same_ms = 0
        for _ in range(50):
            read_fd, write_fd = os.pipe()
            before = new_message_id()
            pid = libc.fork()
            if pid == 0:
                os.write(write_fd, ",".join(new_message_id() for _ in range(3)).encode())
                os._exit(0)
            assert pid > 0, ctypes.get_errno()
            parent_ids = {new_message_id() for _ in range(3)}
            os.close(write_fd)
            child_ids = os.read(read_fd, 200).decode().split(",")
            os.close(read_fd)
            os.waitpid(pid, 0)
            assert len(child_ids) == 3 and child_ids == sorted(set(child_ids)), child_ids
            same_ms += child_ids[0][:10] == before[:10]
            duplicates += len(parent_ids & set(child_ids))
        print(duplicates, same_ms)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    duplicates, same_ms = map(int, done.stdout.split())
    assert duplicates == 0
    if same_ms == 0:
        pytest.skip("no raw fork landed in the parent's millisecond on this machine: nothing was exercised")


def _mint_into_pipe(connection: multiprocessing.connection.Connection, count: int) -> None:
    connection.send([new_message_id() for _ in range(count)])
    connection.close()


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method"
)
def test_multiprocessing_fork_children_mint_distinct_ids() -> None:
    context = multiprocessing.get_context("fork")
    count = 5_000
    new_message_id()
    receivers, processes = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for _ in range(3):
            receiver, sender = context.Pipe(duplex=False)
            process = context.Process(target=_mint_into_pipe, args=(sender, count))
            process.start()
            sender.close()
            receivers.append(receiver)
            processes.append(process)
    ids = [new_message_id() for _ in range(count)]
    for receiver, process in zip(receivers, processes):
        child_ids = receiver.recv()
        receiver.close()
        process.join(timeout=60)
        assert process.exitcode == 0
        assert_strictly_increasing(child_ids)
        ids.extend(child_ids)
    assert len(set(ids)) == len(ids)


def test_the_fork_reset_hook_is_exposed_by_the_core() -> None:
    # dshkit registers it with os.register_at_fork at import; it must exist and be callable.
    assert callable(dshkit._core._reset_ids_after_fork)


# --- the ULID text encoding, exposed for ids derived from other data -------------------------


def reference_ulid_text(value: int) -> str:
    """Crockford base32 of a 128-bit value, written out in Python (what repair.py did itself)."""
    return "".join(CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def test_encode_ulid_is_the_crockford_text_of_any_128_bit_value() -> None:
    rng = random.Random(8)
    values = [0, 1, 31, 32, 2**80, 2**80 - 1, 2**127, 2**128 - 1] + [rng.getrandbits(128) for _ in range(2_000)]
    for value in values:
        text = encode_ulid(value)
        assert type(text) is str and ULID_PATTERN.fullmatch(text), text
        assert text == reference_ulid_text(value)
        assert decode(text) == value
    assert encode_ulid(0) == "0" * 26
    assert encode_ulid(2**128 - 1) == "7" + "Z" * 25


def test_encode_ulid_agrees_with_minted_ids() -> None:
    for minted in (new_message_id() for _ in range(100)):
        assert encode_ulid(decode(minted)) == minted


@pytest.mark.parametrize("value", [-1, 2**128, 2**200, -(2**128)])
def test_encode_ulid_refuses_values_outside_128_bits(value: int) -> None:
    with pytest.raises(ValueError, match="outside 0 .. 2\\*\\*128 - 1"):
        encode_ulid(value)


@pytest.mark.parametrize("value", ["0", 1.0, None, b"\x00"])
def test_encode_ulid_refuses_non_ints(value: object) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        encode_ulid(value)  # type: ignore[arg-type]


def test_crash_repair_ids_are_unchanged_by_the_native_encoding() -> None:
    """closer_message_id now encodes natively: its ids must stay byte-identical to the ones
    earlier versions wrote into logs (pinned values computed with the Python encoding)."""
    assert closer_message_id("c1", 7) == "7WVVS18SMT0K3CTKWFTSMMMQQX"
    assert closer_message_id("call_0001", 0) == "5K4G9DBMD89AVHZEJM5TMVHCQY"
    assert closer_message_id("\u00e9", 123456) == "369255N0JDSY8P1C3V9FPKAWJ1"
    for seq in range(300):
        call_id = f"call-{seq % 7}"
        digest = hashlib.sha256(f"dshkit/crash-repair\x00{call_id}\x00{seq}".encode()).digest()
        value = (int.from_bytes(digest[:17], "big") >> 6) & ((1 << 128) - 1)
        assert closer_message_id(call_id, seq) == reference_ulid_text(value)
