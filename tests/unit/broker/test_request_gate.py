"""RequestGate: bounded concurrency and queue, SYSTEM_BUSY beyond (backpressure)."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.broker.request_gate import RequestGate
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError


async def test_request_gate_overload_and_slow_queue() -> None:
    """1. Gate with 1 slot, 1 waiting place, 50 ms max wait. 2. Take the slot; a second
    request waits; a third is refused at once. 3. Hold the slot 100 ms, then release.
    Expected: the third gets SYSTEM_BUSY [OVERLOAD]; the second, having waited > 50 ms, gets
    SYSTEM_BUSY [TIMEOUT_CLEAN_QUEUE]; afterwards the gate admits again."""
    gate = RequestGate("send", max_concurrency=1, max_waiting=1, max_wait_ms=50)
    async with asyncio.timeout(5):
        await gate.acquire()
        second = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        assert gate.waiting == 1
        with pytest.raises(RemoteError, match="OVERLOAD") as overload:
            await gate.acquire()
        assert overload.value.code == ResponseCode.SYSTEM_BUSY
        await asyncio.sleep(0.1)
        gate.release()
        with pytest.raises(RemoteError, match="TIMEOUT_CLEAN_QUEUE"):
            await second
        await gate.acquire()
        gate.release()
