"""RequestGate: bounded concurrency and queue, SYSTEM_BUSY beyond (backpressure)."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from rocketpy.broker.request_gate import RequestGate, gated, gated_nowait, release_slot_early
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import (
    Channel,
    NowaitProcessor,
    NowaitResult,
    RequestContext,
)
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


async def test_request_gate_try_acquire_respects_waiters_and_cancellation() -> None:
    """1. Gate with 1 slot. 2. try_acquire takes it; a second try_acquire fails. 3. A waiter
    queues; it is cancelled; release. 4. Another waiter queues; release hands it the slot.
    Expected: the cancelled waiter does not keep the slot (try_acquire succeeds after the
    release); a queued waiter gets the slot before any try_acquire can jump the queue."""
    gate = RequestGate("send", max_concurrency=1, max_waiting=4)
    async with asyncio.timeout(5):
        assert gate.try_acquire()
        assert not gate.try_acquire()
        cancelled = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        gate.release()
        assert gate.try_acquire()
        waiter = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        gate.release()
        assert not gate.try_acquire()  # handed to the waiter, not free
        await waiter
        gate.release()
        assert gate.try_acquire()
        gate.release()


def _slow_or_now(
    gate: RequestGate, *, slow_code: int
) -> tuple[NowaitProcessor, asyncio.Event, list[int]]:
    """``gate`` around a fast path that answers at once ("now"), except requests of
    ``slow_code``, which get an awaitable answering "later" once the returned event is set; the
    awaiting processor answers "queued" and records each request's code in the returned list."""
    release = asyncio.Event()
    queued: list[int] = []

    async def finish(req: RemotingCommand) -> RemotingCommand:
        await release.wait()
        return req.make_response(remark="later")

    def nowait(ctx: RequestContext, req: RemotingCommand) -> NowaitResult:
        return finish(req) if req.code == slow_code else req.make_response(remark="now")

    async def processor(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        queued.append(req.code)
        return req.make_response(remark="queued")

    return gated_nowait(gate, nowait, processor), release, queued


async def test_request_gate_nowait_holds_slot_only_while_awaiting() -> None:
    """1. Gate with 1 slot; a nowait processor answering at once for code 1 and returning an
    awaitable for code 2. 2. Run code 1, then code 2 without awaiting its result, then code 1
    again. 3. Finish the awaitable.
    Expected: code 1 answers synchronously and frees the slot; code 2 holds the slot until its
    awaitable is done, so the next code 1 is queued through the awaiting processor instead."""
    gate = RequestGate("send", max_concurrency=1, max_waiting=4)
    run, release, queued = _slow_or_now(gate, slow_code=2)
    ctx = RequestContext(channel=cast(Channel, None))
    async with asyncio.timeout(5):
        first = run(ctx, RemotingCommand.request(1))
        assert isinstance(first, RemotingCommand)
        assert first.remark == "now"
        pending = run(ctx, RemotingCommand.request(2))
        assert not isinstance(pending, RemotingCommand)
        assert pending is not None
        holding = asyncio.ensure_future(pending)
        blocked = run(ctx, RemotingCommand.request(1))
        assert not isinstance(blocked, RemotingCommand)
        assert blocked is not None
        later = asyncio.ensure_future(blocked)
        await asyncio.sleep(0)
        assert queued == []
        release.set()
        assert (await holding).remark == "later"
        assert (await later).remark == "queued"
        assert queued == [1]
        assert gate.try_acquire()


async def test_request_gate_nowait_fallback_can_release_early() -> None:
    """1. A gate with one slot wraps a fast path that, for request A, returns a coroutine which
    calls release_slot_early and waits for an event (the SYNC_MASTER/all-ack wait after the
    append), and answers B at once. 2. Start A's coroutine, then run B. 3. Set the event.
    Expected: B is answered synchronously while A still waits (A gave its slot back); after A
    ends exactly one slot is free."""
    gate = RequestGate("send", max_concurrency=1, max_waiting=4)
    acked = asyncio.Event()
    done: list[str] = []

    async def finish_a(request: RemotingCommand) -> RemotingCommand:
        release_slot_early()
        await acked.wait()
        done.append("A")
        return request.make_response(ResponseCode.SUCCESS)

    def nowait(ctx: RequestContext, request: RemotingCommand) -> NowaitResult:
        if (request.ext_fields or {})["name"] == "A":
            return finish_a(request)
        done.append("B")
        return request.make_response(ResponseCode.SUCCESS)

    async def queued(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise AssertionError("B must not queue: A gave its slot back")

    run = gated_nowait(gate, nowait, queued)
    ctx = RequestContext(channel=FakeChannel("127.0.0.1:1"))
    async with asyncio.timeout(5):
        pending = run(ctx, _named("A"))
        assert not isinstance(pending, RemotingCommand)
        assert pending is not None
        first = asyncio.ensure_future(pending)
        await asyncio.sleep(0)
        answer = run(ctx, _named("B"))
        assert isinstance(answer, RemotingCommand)
        assert done == ["B"]
        acked.set()
        await first
        assert done == ["B", "A"]
        assert gate.try_acquire()
        assert not gate.try_acquire()
        gate.release()


async def test_request_gate_queue_drains_in_a_turn_in_order() -> None:
    """1. Gate with 4 slots held by four requests that wait (awaitables). 2. 50 more requests
    arrive; each queues. 3. The four finish; count loop turns until the 50 are answered.
    Expected: the 50 run in arrival order within two loop turns of the slots coming back (a
    freed slot handed to one waiter moved four per turn: a pipelining producer's queue never
    drained), and a request arriving afterwards is answered at once again."""
    gate = RequestGate("send", max_concurrency=4, max_waiting=100)
    run, release, order = _slow_or_now(gate, slow_code=0)
    ctx = RequestContext(channel=cast(Channel, None))
    async with asyncio.timeout(5):
        slow = []
        for _ in range(4):
            result = run(ctx, RemotingCommand.request(0))
            assert result is not None
            assert not isinstance(result, RemotingCommand | bytes)
            slow.append(asyncio.ensure_future(result))
        queued = []
        for code in range(1, 51):
            pending = run(ctx, RemotingCommand.request(code))
            assert pending is not None
            assert not isinstance(pending, RemotingCommand | bytes)
            queued.append(asyncio.ensure_future(pending))
        await asyncio.sleep(0)
        assert gate.waiting == 50
        release.set()
        await asyncio.gather(*slow)
        turns = 0
        while not all(q.done() for q in queued):
            await asyncio.sleep(0)
            turns += 1
        assert turns <= 2, f"{turns} loop turns"
        assert order == list(range(1, 51))
        assert gate.waiting == 0
        assert isinstance(run(ctx, RemotingCommand.request(99)), RemotingCommand)
