"""Synchronous (nowait) processors and the shared per-connection deadline timer, on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import ConnectionClosed, RemoteError, RequestTimeout
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import decode_frame, encode_frame
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.dispatch import (
    Deferred,
    NowaitResult,
    ProcessorRegistry,
    RequestContext,
)
from rocketpy.remoting.transport.server import RemotingServer

pytestmark = pytest.mark.integration

FAST = 9101
LATER = 9102
REFUSE = 9103
SILENT = 9104


@contextlib.asynccontextmanager
async def _serving(reg: ProcessorRegistry) -> AsyncIterator[tuple[RemotingServer, RemotingClient]]:
    """A started server for ``reg`` and a client; both stopped on the way out."""
    server = RemotingServer(reg)
    await server.start()
    client = RemotingClient()
    try:
        yield server, client
    finally:
        await client.close()
        await server.stop()


async def _never(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
    raise AssertionError("the awaiting processor must not run when a nowait one is registered")


def _registry(release: asyncio.Event, ran: list[str]) -> ProcessorRegistry:
    reg = ProcessorRegistry()

    def fast(ctx: RequestContext, req: RemotingCommand) -> NowaitResult:
        ran.append("fast" if asyncio.current_task() is None else "fast-in-task")
        return req.make_response(remark="fast")

    async def finish(req: RemotingCommand) -> RemotingCommand:
        async with asyncio.timeout(10):
            await release.wait()
        return req.make_response(remark="later")

    def later(ctx: RequestContext, req: RemotingCommand) -> NowaitResult:
        return finish(req)

    def refuse(ctx: RequestContext, req: RemotingCommand) -> NowaitResult:
        raise RemoteError(ResponseCode.NO_PERMISSION, "refused at once")

    async def silent(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand | None:
        return None  # never answers: the caller's timeout decides

    reg.register(FAST, _never, nowait=fast)
    reg.register(LATER, _never, nowait=later)
    reg.register(REFUSE, _never, nowait=refuse)
    reg.register(SILENT, silent)
    return reg


async def test_nowait_processor_answers_without_task_and_awaitable_later() -> None:
    """1. Register nowait processors: FAST answers at once, LATER returns an awaitable that waits
    for an event, REFUSE raises RemoteError. 2. Send LATER, then FAST on the same connection.
    3. Release the event.
    Expected: FAST is answered (outside any task) while LATER is still waiting; LATER is answered
    after the release; REFUSE gets its code and remark; the awaiting processors never run."""
    release = asyncio.Event()
    ran: list[str] = []
    async with _serving(_registry(release, ran)) as (server, client):
        async with asyncio.timeout(10):
            later = asyncio.create_task(
                client.invoke(server.address, RemotingCommand.request(LATER), 5)
            )
            fast = await client.invoke(server.address, RemotingCommand.request(FAST), 5)
            assert (fast.code, fast.remark, later.done()) == (ResponseCode.SUCCESS, "fast", False)
            assert ran == ["fast"]
            release.set()
            resp = await later
            assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, "later")
            refused = await client.invoke(server.address, RemotingCommand.request(REFUSE), 5)
            assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, "refused at once")


async def test_nowait_deferred_settles_on_a_frame_or_nothing() -> None:
    """1. Register a nowait processor that returns a Deferred (a DLedger send's quorum wait, a
    follower's push). 2. Send two requests; settle the first with the response's whole frame,
    the second with None (a stopped member: no answer).
    Expected: the client gets the first response (code, remark, the request's opaque); the
    second times out unanswered, and nothing stays in flight on the connection."""
    reg = ProcessorRegistry()
    parked: list[tuple[RemotingCommand, Deferred]] = []

    def quorum(ctx: RequestContext, req: RemotingCommand) -> NowaitResult:
        d = Deferred()
        parked.append((req, d))
        return d

    reg.register(FAST, _never, nowait=quorum)
    async with _serving(reg) as (server, client):
        async with asyncio.timeout(10):
            call = asyncio.create_task(
                client.invoke(server.address, RemotingCommand.request(FAST), 5)
            )
            silent = asyncio.create_task(
                client.invoke(server.address, RemotingCommand.request(FAST), 0.5)
            )
            await wait_until(lambda: len(parked) == 2, 5.0)
            (req, d), (_, nothing) = parked
            d.settle(encode_frame(req.make_response(remark="acked")))
            resp = await call
            assert (resp.code, resp.remark, resp.opaque) == (
                ResponseCode.SUCCESS, "acked", req.opaque,
            )  # fmt: skip
            nothing.settle(None)
            with pytest.raises(RequestTimeout):
                await silent
            assert next(iter(server.channels)).inflight == 0


async def test_nowait_register_without_nowait_drops_it() -> None:
    """1. Register FAST with a nowait form. 2. Register FAST again without one.
    Expected: lookup_nowait finds nothing after the second registration."""
    reg = ProcessorRegistry()
    reg.register(FAST, _never, nowait=lambda ctx, req: None)
    assert reg.lookup_nowait(FAST) is not None
    reg.register(FAST, _never)
    assert reg.lookup_nowait(FAST) is None


async def test_deadline_timer_expires_in_order_and_out_of_order() -> None:
    """1. A server whose SILENT processor never answers. 2. On one connection invoke SILENT with
    a 2 s timeout, then with 0.2 s (a deadline earlier than the one queued before it: its own
    timer), and a FAST request in between. 3. Then 0.3 s and 0.5 s (in deadline order: the
    shared timer, re-armed after the first expiry).
    Expected: each times out after its own budget, not another request's; the answered request
    is unaffected; the connection stays open."""
    async with _serving(_registry(asyncio.Event(), [])) as (server, client):
        async with asyncio.timeout(10):
            conn = await client.connection(server.address)
            long_wait = asyncio.create_task(conn.invoke(RemotingCommand.request(SILENT), 2.0))
            started = time.monotonic()
            with pytest.raises(RequestTimeout):
                await conn.invoke(RemotingCommand.request(SILENT), 0.2)
            assert 0.15 <= time.monotonic() - started < 1.5
            ok = await conn.invoke(RemotingCommand.request(FAST), 5)
            assert ok.code == ResponseCode.SUCCESS
            with pytest.raises(RequestTimeout):
                await long_wait
            assert time.monotonic() - started >= 1.9
            started = time.monotonic()
            first = asyncio.create_task(conn.invoke(RemotingCommand.request(SILENT), 0.3))
            with pytest.raises(RequestTimeout):
                await conn.invoke(RemotingCommand.request(SILENT), 0.5)
            assert 0.45 <= time.monotonic() - started < 2.0
            assert first.done()
            with pytest.raises(RequestTimeout):
                await first
            assert not conn.is_closed


async def test_answers_to_one_read_go_out_in_one_write() -> None:
    """1. A plain blocking client thread sends 64 requests in one write; the nowait processor
    answers each at once, but on the 64th waits (blocking the loop, 0.5 s) for the client to
    have read any response. 2. The client reads every response.
    Expected: the client had no response while the 64th request of the read was handled (the
    answers to one read go out in one write at its end, not every WRITE_SLICE_FRAMES frames);
    all 64 answered in order."""
    got_any = threading.Event()
    seen: list[bool] = []
    reg = ProcessorRegistry()

    def fast(ctx: RequestContext, req: RemotingCommand) -> NowaitResult:
        if req.opaque == 64:
            seen.append(got_any.wait(0.5))
        return req.make_response(remark=str(req.opaque))

    reg.register(FAST, _never, nowait=fast)
    server = RemotingServer(reg)
    await server.start()
    host, port = server.address.rsplit(":", 1)

    def client() -> list[int]:
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            frames = []
            for i in range(64):
                req = RemotingCommand.request(FAST)
                req.opaque = i + 1
                frames.append(encode_frame(req))
            sock.sendall(b"".join(frames))
            buf, opaques = b"", []
            while len(opaques) < 64:
                chunk = sock.recv(65536)
                assert chunk, "server closed"
                got_any.set()
                buf += chunk
                while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
                    n = int.from_bytes(buf[:4], "big")
                    opaques.append(decode_frame(buf[4 : 4 + n]).opaque)
                    buf = buf[4 + n :]
            return opaques

    try:
        async with asyncio.timeout(20):
            opaques = await asyncio.to_thread(client)
    finally:
        await server.stop()
    assert seen == [False]
    assert opaques == list(range(1, 65))


DEFERRED = 9105


async def test_deferred_answer_is_written_from_the_settling_call() -> None:
    """1. Register a nowait processor returning a Deferred per request: the first settled
    before it returns, the others kept. 2. Send three requests on one connection. 3. Settle the
    second with a response from a plain callback (no task, no future) and the third with an
    error.
    Expected: the first is answered at once; the second's response is queued by the settling
    call itself (the connection holds no answer future for it); the third gets SYSTEM_ERROR
    with the error in its remark; a late second settle is ignored and nothing stays in flight."""
    kept: list[tuple[RemotingCommand, Deferred]] = []
    reg = ProcessorRegistry()

    def deferred(ctx: RequestContext, req: RemotingCommand) -> NowaitResult:
        d = Deferred()
        if req.body == b"now":
            d.settle(req.make_response(remark="at once"))
        else:
            kept.append((req, d))
        return d

    reg.register(DEFERRED, _never, nowait=deferred)
    async with _serving(reg) as (server, client):
        async with asyncio.timeout(10):
            first = await client.invoke(
                server.address, RemotingCommand.request(DEFERRED, None, b"now"), 5
            )
            assert first.remark == "at once"
            second = asyncio.create_task(
                client.invoke(server.address, RemotingCommand.request(DEFERRED), 5)
            )
            third = asyncio.create_task(
                client.invoke(server.address, RemotingCommand.request(DEFERRED), 5)
            )
            await wait_until(lambda: len(kept) == 2, 5)
            conn = next(iter(server.channels))
            assert conn.inflight == 2
            (req2, d2), (_, d3) = kept
            asyncio.get_running_loop().call_soon(d2.settle, req2.make_response(remark="later"))
            assert (await second).remark == "later"
            d2.settle(req2.make_response(remark="again"))  # ignored
            d3.settle(RuntimeError("put failed"))
            failed = await third
            assert failed.code == ResponseCode.SYSTEM_ERROR
            assert "put failed" in (failed.remark or "")
            assert conn.inflight == 0


async def test_deferred_can_be_awaited() -> None:
    """A Deferred awaited (a processor's coroutine form): settled later -> its answer; settled
    with an error -> the error raised."""
    async with asyncio.timeout(5):
        d = Deferred()
        waiting = asyncio.ensure_future(d.wait())
        await asyncio.sleep(0)
        d.settle(b"frame")
        assert await waiting == b"frame"
        failed = Deferred()
        failed.settle(ValueError("no"))
        with pytest.raises(ValueError, match="no"):
            await failed.wait()


async def test_invoke_then_hands_over_response_timeout_and_close() -> None:
    """1. invoke_then FAST with a handler. Expected: the handler gets the response, once, from
    the read (no future of the caller's to await). 2. invoke_then SILENT with a 0.2 s timeout.
    Expected: the handler gets RequestTimeout. 3. invoke_then SILENT, then close the connection.
    Expected: the handler gets ConnectionClosed; nothing else is called."""
    release = asyncio.Event()
    server = RemotingServer(_registry(release, []))
    await server.start()
    client = RemotingClient()
    got: list[RemotingCommand | BaseException] = []
    try:
        async with asyncio.timeout(10):
            conn = await client.connection(server.address)
            conn.invoke_then(RemotingCommand.request(FAST), 5.0, got.append)
            await wait_until(lambda: len(got) == 1, 5)
            assert isinstance(got[0], RemotingCommand)
            assert got[0].remark == "fast"
            conn.invoke_then(RemotingCommand.request(SILENT), 0.2, got.append)
            await wait_until(lambda: len(got) == 2, 5)
            assert isinstance(got[1], RequestTimeout)
            conn.invoke_then(RemotingCommand.request(SILENT), 5.0, got.append)
            conn.abort()
            await wait_until(lambda: len(got) == 3, 5)
            assert isinstance(got[2], ConnectionClosed)
            await asyncio.sleep(0.3)
            assert len(got) == 3
    finally:
        await client.close()
        await server.stop()
