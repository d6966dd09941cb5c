"""`read_until_cut`: a read awaited in the caller's task, cut where it waits by the cancel token."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from dshkit.agent.cancel import CancelToken
from dshkit.agent._turn.stream_cut import read_until_cut

COUNTS_CANCELS = sys.version_info >= (3, 11)  # Task.cancelling()/uncancel()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def cancel_requests() -> int:
    task = asyncio.current_task()
    assert task is not None
    return task.cancelling() if COUNTS_CANCELS else 0


async def cancel_soon(token: CancelToken) -> None:
    """Cancel `token` from another task once the read waits."""
    await asyncio.sleep(0.01)
    token.cancel()


def test_a_read_that_is_not_cancelled_runs_to_its_end() -> None:
    async def main() -> None:
        token = CancelToken()
        seen: list[str] = []

        async def read() -> None:
            await asyncio.sleep(0)
            seen.append("read")

        assert await read_until_cut(read(), token) is True
        assert seen == ["read"]
        token.cancel()  # after the read: no cut, nothing pending in the task
        await asyncio.sleep(0)
        assert cancel_requests() == 0

    run(main())


def test_a_cancel_from_another_task_cuts_the_read_where_it_waits() -> None:
    async def main() -> None:
        token = CancelToken()
        never = asyncio.Event()
        steps: list[str] = []

        async def read() -> None:
            try:
                steps.append("waiting")
                await never.wait()  # a model that never looks at its cancel signal
                steps.append("woke")
            finally:
                steps.append("closed")

        canceller = asyncio.create_task(cancel_soon(token))
        assert await asyncio.wait_for(read_until_cut(read(), token), 5) is False
        await canceller
        assert steps == ["waiting", "closed"]
        assert cancel_requests() == 0  # the cut's task cancel was taken back
        await asyncio.sleep(0)  # and nothing is left to land later

    run(main())


def test_a_cancel_asked_while_the_read_runs_lands_when_it_next_waits() -> None:
    async def main() -> None:
        token = CancelToken()
        never = asyncio.Event()
        steps: list[str] = []

        async def read() -> None:
            token.cancel()  # e.g. an observer of a chunk's append, called from the read
            steps.append("still running")
            try:
                await never.wait()
            except asyncio.CancelledError:
                steps.append("cut")
                raise

        assert await read_until_cut(read(), token) is False
        assert steps == ["still running", "cut"]
        assert cancel_requests() == 0

    run(main())


def test_a_cancel_asked_by_a_read_that_then_ends_without_waiting_counts_and_leaves_nothing() -> None:
    async def main() -> None:
        token = CancelToken()

        async def read() -> None:
            token.cancel()

        assert await read_until_cut(read(), token) is False
        await asyncio.sleep(0)  # the deferred cut found the read over: no stray CancelledError
        await asyncio.sleep(0)
        assert cancel_requests() == 0

    run(main())


def test_a_token_cancelled_before_the_read_cuts_it_at_its_first_wait() -> None:
    async def main() -> None:
        token = CancelToken()
        token.cancel()
        never = asyncio.Event()

        async def read() -> None:
            await never.wait()

        assert await asyncio.wait_for(read_until_cut(read(), token), 5) is False

    run(main())


def test_a_cancel_of_the_task_itself_propagates() -> None:
    async def main() -> None:
        token = CancelToken()
        never = asyncio.Event()
        closed: list[bool] = []

        async def read() -> None:
            try:
                await never.wait()
            finally:
                closed.append(True)

        reader = asyncio.create_task(read_until_cut(read(), token))
        await asyncio.sleep(0.01)
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        assert closed == [True]
        assert not token.cancelled

    run(main())


@pytest.mark.skipif(not COUNTS_CANCELS, reason="3.10 cannot tell a task's cancel from the token's cut")
def test_a_cancel_of_the_task_that_coincides_with_the_cut_still_propagates() -> None:
    async def main() -> None:
        token = CancelToken()
        never = asyncio.Event()

        async def read() -> None:
            await never.wait()

        reader = asyncio.create_task(read_until_cut(read(), token))
        await asyncio.sleep(0.01)
        token.cancel()  # the cut: one task cancel
        reader.cancel()  # and the task's own, before either landed
        with pytest.raises(asyncio.CancelledError):
            await reader
        assert reader.cancelling() == 1  # only the task's own cancel is left

    run(main())


@pytest.mark.parametrize("on_cut", ["swallows it", "raises another error"])
def test_a_read_that_does_not_end_cancelled_when_cut_leaves_no_cancel_behind(on_cut: str) -> None:
    async def main() -> None:
        token = CancelToken()
        never = asyncio.Event()

        async def read() -> None:
            try:
                await never.wait()
            except asyncio.CancelledError:
                if on_cut == "raises another error":
                    raise ValueError("stream closed") from None
                # else: a stream that ends quietly when cut

        canceller = asyncio.create_task(cancel_soon(token))
        if on_cut == "swallows it":
            assert await read_until_cut(read(), token) is False  # still a cut read
        else:
            with pytest.raises(ValueError, match="stream closed"):
                await read_until_cut(read(), token)
        await canceller
        assert cancel_requests() == 0
        await asyncio.sleep(0)  # no stray CancelledError lands later

    run(main())
