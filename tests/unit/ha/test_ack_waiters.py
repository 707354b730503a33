"""AckWaiters: sends waiting for a replication threshold, one heap and one sweeper timer."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.common.ack_waiters import AckWaiters


async def test_ack_waiters_release_resolves_only_offsets_at_or_below_threshold() -> None:
    """1. Waits at offsets 300, 100, 200 (added out of order), 5 s timeout.
    2. release(150), then release(300).
    Expected: after the first only 100 is True and two remain; after the second all are True
    and none remain."""
    waiters = AckWaiters()
    async with asyncio.timeout(5):
        tasks = {o: asyncio.create_task(waiters.wait(o, 5)) for o in (300, 100, 200)}
        await asyncio.sleep(0)
        waiters.release(150)
        assert await tasks[100] is True
        assert not tasks[200].done()
        assert not tasks[300].done()
        assert len(waiters) == 2
        waiters.release(300)
        assert await tasks[200] is True
        assert await tasks[300] is True
        assert len(waiters) == 0


async def test_ack_waiters_deadline_answers_false_and_keeps_later_waits() -> None:
    """1. A wait at offset 10 with a 0.08 s timeout, a wait at 20 with a 5 s timeout.
    2. Let the first expire (the sweeper runs every eighth of the first timeout).
    3. release(20).
    Expected: the first returns False within 0.5 s; the second stays pending, then True."""
    waiters = AckWaiters()
    async with asyncio.timeout(5):
        short = asyncio.create_task(waiters.wait(10, 0.08))
        long = asyncio.create_task(waiters.wait(20, 5))
        assert await asyncio.wait_for(short, 0.5) is False
        assert not long.done()
        waiters.release(20)
        assert await long is True


async def test_ack_waiters_fail_all_answers_false_at_once() -> None:
    """1. Waits at offsets 1 and 2 with a 5 s timeout, one already released (offset 1).
    2. fail_all(), then release(10) and a new wait at 3 released at 10.
    Expected: the pending wait returns False at once, the released one stays True, nothing
    remains; the waiters keep working afterwards (the new wait is True)."""
    waiters = AckWaiters()
    async with asyncio.timeout(1):
        done = asyncio.create_task(waiters.wait(1, 5))
        pending = asyncio.create_task(waiters.wait(2, 5))
        await asyncio.sleep(0)
        waiters.release(1)
        waiters.fail_all()
        assert await done is True
        assert await pending is False
        assert len(waiters) == 0
        waiters.release(10)
        later = asyncio.create_task(waiters.wait(3, 5))
        await asyncio.sleep(0)
        waiters.release(10)
        assert await later is True


async def test_ack_waiters_cancel_all_cancels_pending_waits() -> None:
    """1. Two pending waits. 2. cancel_all().
    Expected: both raise CancelledError; nothing remains."""
    waiters = AckWaiters()
    async with asyncio.timeout(5):
        tasks = [asyncio.create_task(waiters.wait(o, 5)) for o in (1, 2)]
        await asyncio.sleep(0)
        waiters.cancel_all()
        for task in tasks:
            with pytest.raises(asyncio.CancelledError):
                await task
        assert len(waiters) == 0


async def test_ack_waiters_cancelled_sender_is_dropped_by_sweep() -> None:
    """1. A wait at offset 5 (0.08 s timeout) whose task is cancelled; a wait at 6 (5 s).
    2. Wait past the sweep period.
    Expected: the sweep drops the cancelled entry (one remains), the other still resolves."""
    waiters = AckWaiters()
    async with asyncio.timeout(5):
        gone = asyncio.create_task(waiters.wait(5, 0.08))
        kept = asyncio.create_task(waiters.wait(6, 5))
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        await asyncio.sleep(0.05)
        assert len(waiters) == 1
        waiters.release(6)
        assert await kept is True
