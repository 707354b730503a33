"""RemotingServer and RemotingClient on real loopback sockets."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ConnectFailed, ConnectionClosed, RequestTimeout
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import FrameLimits, encode_frame
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.connection import OVERLOAD_REMARK
from rocketpy.remoting.transport.dispatch import Channel, ProcessorRegistry, RequestContext
from rocketpy.remoting.transport.server import RemotingServer

pytestmark = pytest.mark.integration

ECHO = 9001
SLOW = 9002
BOOM = 9003


async def _echo(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
    return req.make_response(ext_fields=req.ext_fields, body=req.body)


def _registry(
    gate: asyncio.Event | None = None, seen: list[int] | None = None
) -> ProcessorRegistry:
    reg = ProcessorRegistry()
    reg.register(ECHO, _echo)

    async def slow(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        if gate is not None:
            async with asyncio.timeout(10):
                await gate.wait()
        return req.make_response(remark="slow done")

    async def boom(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        if seen is not None:
            seen.append(req.code)
        raise ValueError("processor exploded")

    reg.register(SLOW, slow)
    reg.register(BOOM, boom)
    return reg


async def _raw_call(port: int, frame: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(frame)
        await writer.drain()
        async with asyncio.timeout(5):
            (length,) = struct.unpack(">i", await reader.readexactly(4))
            return await reader.readexactly(length)
    finally:
        writer.close()


async def test_transport_request_response_round_trip() -> None:
    """1. Start a server with an echo processor. 2. invoke. 3. Same opaque, fields and body back."""
    server = RemotingServer(_registry())
    await server.start()
    client = RemotingClient()
    try:
        req = RemotingCommand.request(ECHO, {"k": "v"}, b"payload")
        resp = await client.invoke(server.address, req, 5)
        assert (resp.code, resp.opaque, resp.ext_fields, resp.body) == (
            ResponseCode.SUCCESS,
            req.opaque,
            {"k": "v"},
            b"payload",
        )
        assert resp.is_response
    finally:
        await client.close()
        await server.stop()


async def test_transport_unknown_code_keeps_connection() -> None:
    """P: an unknown code gets REQUEST_CODE_NOT_SUPPORTED with upstream's remark; the link stays."""
    server = RemotingServer(_registry())
    await server.start()
    client = RemotingClient()
    try:
        resp = await client.invoke(server.address, RemotingCommand.request(54321), 5)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert resp.remark == " request type 54321 not supported"
        again = await client.invoke(server.address, RemotingCommand.request(ECHO), 5)
        assert again.code == ResponseCode.SUCCESS
        assert len(server.channels) == 1
    finally:
        await client.close()
        await server.stop()


async def test_transport_processor_error_is_system_error() -> None:
    """A processor exception becomes SYSTEM_ERROR with a short description, no traceback."""
    server = RemotingServer(_registry())
    await server.start()
    client = RemotingClient()
    try:
        resp = await client.invoke(server.address, RemotingCommand.request(BOOM), 5)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == "ValueError: processor exploded"
    finally:
        await client.close()
        await server.stop()


async def test_transport_oneway_never_answered() -> None:
    """Oneway requests are processed but never answered, even on error or unknown code."""
    seen: list[int] = []
    server = RemotingServer(_registry(seen=seen))
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        for code in (BOOM, 54321):
            writer.write(encode_frame(RemotingCommand.request(code, oneway=True)))
        ping = RemotingCommand.request(ECHO)
        writer.write(encode_frame(ping))
        await writer.drain()
        async with asyncio.timeout(5):
            (length,) = struct.unpack(">i", await reader.readexactly(4))
            first = await reader.readexactly(length)
        assert f'"opaque":{ping.opaque}'.encode() in first
        assert seen == [BOOM]
    finally:
        writer.close()
        await server.stop()


async def test_p_oversized_frame_closes_only_that_connection() -> None:
    """P: a frame declaring more than 16 MiB closes that connection; another keeps working."""
    server = RemotingServer(_registry())
    await server.start()
    client = RemotingClient()
    try:
        await client.invoke(server.address, RemotingCommand.request(ECHO), 5)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(struct.pack(">i", 16 * 1024 * 1024))
        await writer.drain()
        async with asyncio.timeout(5):
            assert await reader.read() == b""
        writer.close()
        resp = await client.invoke(server.address, RemotingCommand.request(ECHO), 5)
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await client.close()
        await server.stop()


async def test_p_fuzz_random_and_truncated_frames() -> None:
    """P: thousands of random, truncated and corrupted frames on many connections; a control
    connection keeps getting answers and the server stays up."""
    server = RemotingServer(_registry(), limits=FrameLimits(max_frame_bytes=1 << 20))
    await server.start()
    control = RemotingClient()
    rng = random.Random(20261123)
    valid = encode_frame(RemotingCommand.request(ECHO, {"a": "b"}, b"xyz"))
    try:
        for round_no in range(60):
            _, writer = await asyncio.open_connection("127.0.0.1", server.port)
            for _ in range(50):
                kind = rng.randrange(4)
                if kind == 0:
                    blob = rng.randbytes(rng.randrange(1, 64))
                elif kind == 1:
                    blob = valid[: rng.randrange(1, len(valid))]
                elif kind == 2:
                    mutated = bytearray(valid)
                    mutated[rng.randrange(len(mutated))] = rng.randrange(256)
                    blob = bytes(mutated)
                else:
                    body = rng.randbytes(rng.randrange(0, 40))
                    blob = struct.pack(">iI", 4 + len(body), rng.getrandbits(32)) + body
                writer.write(blob)
            await writer.drain()
            writer.close()
            if round_no % 10 == 0:
                resp = await control.invoke(server.address, RemotingCommand.request(ECHO), 5)
                assert resp.code == ResponseCode.SUCCESS
        resp = await control.invoke(server.address, RemotingCommand.request(ECHO), 5)
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await control.close()
        await server.stop()


async def test_transport_idle_connection_closed() -> None:
    """A connection with no traffic for the idle timeout is closed by the server."""
    server = RemotingServer(_registry(), idle_timeout_s=0.2)
    await server.start()
    client = RemotingClient()
    try:
        conn = await client.connection(server.address)
        async with asyncio.timeout(5):
            await conn.closed_event.wait()
        assert not server.channels
    finally:
        await client.close()
        await server.stop()


async def test_transport_server_to_client_request() -> None:
    """The server invokes a request on the client's connection; the client's registry answers."""
    channels: list[Channel] = []
    reg = _registry()

    async def hello(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        channels.append(ctx.channel)
        return req.make_response()

    reg.register(RequestCode.HEART_BEAT, hello)
    server = RemotingServer(reg)
    await server.start()
    client_reg = ProcessorRegistry()

    async def notified(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(remark="client got " + str(req.code))

    client_reg.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, notified)
    client = RemotingClient(registry=client_reg)
    try:
        await client.invoke(server.address, RemotingCommand.request(RequestCode.HEART_BEAT), 5)
        push = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
        resp = await channels[0].invoke(push, 5)
        assert resp.remark == "client got 40"
    finally:
        await client.close()
        await server.stop()


async def test_transport_invoke_timeout_then_connection_reusable() -> None:
    """A request without a timely answer raises RequestTimeout; the connection stays usable."""
    gate = asyncio.Event()
    server = RemotingServer(_registry(gate))
    await server.start()
    client = RemotingClient()
    try:
        with pytest.raises(RequestTimeout):
            await client.invoke(server.address, RemotingCommand.request(SLOW), 0.1)
        resp = await client.invoke(server.address, RemotingCommand.request(ECHO), 5)
        assert resp.code == ResponseCode.SUCCESS
    finally:
        gate.set()
        await client.close()
        await server.stop()


async def test_transport_pending_fail_when_server_closes() -> None:
    """Pending requests fail with ConnectionClosed when the server drops the connection."""
    gate = asyncio.Event()
    server = RemotingServer(_registry(gate))
    await server.start()
    client = RemotingClient()
    try:
        pending = asyncio.ensure_future(
            client.invoke(server.address, RemotingCommand.request(SLOW), 10)
        )
        await wait_until(lambda: any(c.inflight for c in server.channels), 5)
        for conn in server.channels:
            conn.abort()
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(5):
                await pending
    finally:
        gate.set()
        await client.close()
        await server.stop()


async def test_transport_inflight_cap_answers_system_busy() -> None:
    """Past the per-connection in-flight cap a request is answered SYSTEM_BUSY at once."""
    gate = asyncio.Event()
    server = RemotingServer(_registry(gate), max_inflight_per_connection=2)
    await server.start()
    client = RemotingClient()
    try:
        held = [
            asyncio.ensure_future(client.invoke(server.address, RemotingCommand.request(SLOW), 10))
            for _ in range(2)
        ]
        await wait_until(lambda: sum(c.inflight for c in server.channels) == 2, 5)
        busy = await client.invoke(server.address, RemotingCommand.request(ECHO), 5)
        assert (busy.code, busy.remark) == (ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        gate.set()
        async with asyncio.timeout(5):
            done = await asyncio.gather(*held)
        assert all(r.remark == "slow done" for r in done)
    finally:
        gate.set()
        await client.close()
        await server.stop()


async def test_transport_graceful_stop_finishes_inflight() -> None:
    """stop() lets an in-flight request finish within the deadline before closing."""
    gate = asyncio.Event()
    server = RemotingServer(_registry(gate))
    await server.start()
    client = RemotingClient()
    try:
        pending = asyncio.ensure_future(
            client.invoke(server.address, RemotingCommand.request(SLOW), 10)
        )
        await wait_until(lambda: any(c.inflight for c in server.channels), 5)
        stopping = asyncio.ensure_future(server.stop(timeout_s=5))
        await asyncio.sleep(0.05)
        gate.set()
        async with asyncio.timeout(5):
            resp = await pending
            await stopping
        assert resp.remark == "slow done"
    finally:
        gate.set()
        await client.close()
        await server.stop()


async def test_transport_connect_refused_is_connection_closed() -> None:
    """Connecting to a closed port raises ConnectionClosed promptly."""
    server = RemotingServer(_registry())
    await server.start()
    port = server.port
    await server.stop()
    client = RemotingClient(connect_timeout_s=1)
    try:
        with pytest.raises(ConnectionClosed):
            await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 2)
    finally:
        await client.close()


async def test_transport_rocketmq_request_gets_json_response() -> None:
    """A request in the ROCKETMQ encoding is answered in JSON (remoting.md section 1.1)."""
    server = RemotingServer(_registry())
    await server.start()
    try:
        raw = await _raw_call(server.port, encode_frame(RemotingCommand.request(ECHO), 1))
        assert raw[0] == 0
        assert raw[4:5] == b"{"
    finally:
        await server.stop()


def _stalled_listener() -> tuple[socket.socket, list[socket.socket]]:
    """A loopback listener whose accept queue is full: the kernel drops further SYNs, so a
    connect to it hangs (until its deadline) as across a cut link."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.connect(listener.getsockname())
        fillers.append(s)
    return listener, fillers


async def test_transport_a_caller_giving_up_does_not_cancel_others_waiting_on_the_dial() -> None:
    """1. A listener that never completes a handshake. 2. Caller A invokes with a 50 ms
    deadline (it starts the dial); caller B asks for the same connection meanwhile.
    Expected: A fails with ConnectFailed after its deadline; B is not cancelled by A's giving
    up: it fails on its own, with ConnectFailed after the client's connect timeout (a broker's
    metadata sync once died of A's CancelledError when A was a 200 ms heartbeat)."""
    listener, fillers = _stalled_listener()
    await asyncio.sleep(0.05)
    client = RemotingClient(name="t", connect_timeout_s=0.5)
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        a = asyncio.create_task(client.invoke(addr, RemotingCommand.request(ECHO, {}), 0.05))
        await asyncio.sleep(0.01)
        b = asyncio.create_task(client.connection(addr))
        async with asyncio.timeout(5):
            with pytest.raises(ConnectFailed, match=r"not done within 0\.05 s"):
                await a
            with pytest.raises(ConnectFailed, match="TimeoutError"):
                await b
    finally:
        await client.close()
        listener.close()
        for s in fillers:
            s.close()
