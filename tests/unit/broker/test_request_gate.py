"""RequestGate: bounded concurrency and queue, SYSTEM_BUSY beyond (backpressure)."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.broker.request_gate import RequestGate, gated, release_slot_early
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import RequestContext
from tests.unit.broker.support import FakeChannel


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


def _named(name: str) -> RemotingCommand:
    return RemotingCommand.request(0, {"name": name})


async def test_request_gate_slot_released_early_admits_next_request() -> None:
    """1. A gate with one slot wraps a processor that, for request A, calls release_slot_early
    and then waits for an event (a SYNC_MASTER send waiting for its slave ack). 2. Start A, then
    run B. 3. Set the event.
    Expected: B runs to completion while A still waits (A no longer holds the slot); after A
    ends the gate has exactly one free slot (the early release is not repeated), and outside a
    gated request release_slot_early does nothing."""
    gate = RequestGate("send", max_concurrency=1, max_waiting=4)
    acked = asyncio.Event()
    done: list[str] = []

    async def processor(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        name = (request.ext_fields or {})["name"]
        if name == "A":
            release_slot_early()
            await acked.wait()
        done.append(name)
        return request.make_response(ResponseCode.SUCCESS)

    run = gated(gate, processor)
    ctx = RequestContext(channel=FakeChannel("127.0.0.1:1"))
    async with asyncio.timeout(5):
        first = asyncio.create_task(run(ctx, _named("A")))
        await asyncio.sleep(0)  # let A take the slot and give it back
        await run(ctx, _named("B"))
        assert done == ["B"]
        acked.set()
        await first
        assert done == ["B", "A"]
        release_slot_early()
        await gate.acquire()
        extra = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        assert gate.waiting == 1  # only one slot existed
        gate.release()
        await extra
        gate.release()
