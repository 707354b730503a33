"""Wakeup: waitForRunning's flag and sleeper."""

from __future__ import annotations

import asyncio
import time

from rocketpy.dledger.commitlog_member.wakeup import Wakeup


def test_marked_returns_at_once_and_clears() -> None:
    async def run() -> None:
        w = Wakeup()
        w.set()
        began = time.monotonic()
        await w.wait(5.0)
        assert time.monotonic() - began < 1.0
        began = time.monotonic()
        await w.wait(0.05)  # the mark was cleared: this one sleeps out its timeout
        assert time.monotonic() - began >= 0.04

    asyncio.run(asyncio.wait_for(run(), 10))


def test_set_wakes_the_sleeper() -> None:
    async def run() -> None:
        w = Wakeup()
        sleeper = asyncio.create_task(w.wait(5.0))
        await asyncio.sleep(0.01)
        assert not sleeper.done()
        w.set()
        await asyncio.wait_for(sleeper, 1.0)
        began = time.monotonic()
        await w.wait(0.05)  # cleared by the woken wait
        assert time.monotonic() - began >= 0.04

    asyncio.run(asyncio.wait_for(run(), 10))
