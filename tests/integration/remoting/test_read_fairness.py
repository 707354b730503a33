"""A pipelining peer cannot hold the loop: a connection handles at most two reads per loop turn.

Runs on uvloop, as the daemons do: libuv reads a socket up to 32 times per poll while each read
fills its buffer, which let one producer's burst (megabytes of sends) run before the reput, the
timers or any other connection got a turn.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading

import pytest
import uvloop

from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import encode_frame
from rocketpy.remoting.transport.dispatch import NowaitResult, ProcessorRegistry, RequestContext
from rocketpy.remoting.transport.server import RemotingServer

pytestmark = pytest.mark.integration

CODE = 9201
BODY = 1000
REQUESTS = 6000  # about 6.5 MB: hundreds of full reads
#: The most one read returns (uvloop's receive buffer is 256 kB; asyncio's is smaller).
READ_MAX = 256 * 1024


async def _never(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
    raise AssertionError("the nowait form answers")


def _send_all_then_read(port: int, payload: bytes, answers: list[int]) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        reader = threading.Thread(target=_read_answers, args=(sock, answers))
        reader.start()
        sock.sendall(payload)
        reader.join(60)


def _read_answers(sock: socket.socket, answers: list[int]) -> None:
    buf = b""
    while len(answers) < REQUESTS:
        chunk = sock.recv(1 << 20)
        if not chunk:
            return
        buf += chunk
        while len(buf) >= 4:
            (total,) = struct.unpack_from(">i", buf)
            if len(buf) < 4 + total:
                break
            answers.append(total)
            buf = buf[4 + total :]


async def _burst() -> tuple[list[int], int]:
    """Requests handled in each loop turn while one peer sends a burst; and the frame size."""
    turn = [0]
    handled: dict[int, int] = {}
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def tick() -> None:
        turn[0] += 1
        if not done.done():
            loop.call_soon(tick)

    def answer(ctx: RequestContext, req: RemotingCommand) -> NowaitResult:
        handled[turn[0]] = handled.get(turn[0], 0) + 1
        return req.make_response()

    registry = ProcessorRegistry()
    registry.register(CODE, _never, nowait=answer)
    server = RemotingServer(registry)
    await server.start()
    frame = encode_frame(RemotingCommand.request(CODE, body=b"x" * BODY))
    answers: list[int] = []
    try:
        loop.call_soon(tick)
        async with asyncio.timeout(60):
            await asyncio.to_thread(
                _send_all_then_read,
                int(server.address.rsplit(":", 1)[1]),
                frame * REQUESTS,
                answers,
            )
    finally:
        done.set_result(None)
        await server.stop()
    assert len(answers) == REQUESTS, f"{len(answers)} of {REQUESTS} answered"
    return list(handled.values()), len(frame)


def test_pipelined_burst_yields_the_loop_every_two_reads() -> None:
    """1. A server on uvloop answers a nowait request code; a callback counts loop turns.
    2. One peer writes 6,000 requests (about 6.5 MB) in one go and reads the answers.
    Expected: every request is answered, and no loop turn handled more than two reads' worth
    of requests (2 x 256 kB of frames, plus a frame cut by a read's end)."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        per_turn, frame_size = runner.run(_burst())
    most = max(per_turn)
    assert most * frame_size <= 2 * READ_MAX + frame_size, (
        f"{most} requests ({most * frame_size:,} bytes) handled in one loop turn"
    )
