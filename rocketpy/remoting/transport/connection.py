"""One remoting connection, shared by servers and clients: framing, dispatch, pending requests,
writes.

Owns: an asyncio ``Protocol`` per TCP connection that splits the byte stream into frames (checking
the length against :class:`FrameLimits` before buffering a frame), runs each incoming request as a
contained task through :func:`dispatch`, matches responses to this side's pending requests by
opaque, and coalesces writes (the answers to one read in one ``write`` at its end, others every
few frames or at the end of the loop turn). A request
whose processor has a synchronous form (``ProcessorRegistry.lookup_nowait``) is answered straight
from ``data_received`` without a task; the requests of one read are decoded first, and a run of
consecutive requests of a code with a run form (``lookup_run``) goes to it in one call. A
processor's answer given later is written from its future's done callback, or, for a
``Deferred``, from the call that settles it; ``invoke_then`` hands a response to its handler
from the read that brings it.
Implements the :class:`~rocketpy.remoting.transport.dispatch.Channel` protocol. Mirrors the
per-channel parts of ``NettyRemotingAbstract`` (processRequestCommand / processResponseCommand)
and ``NettyDecoder``.

A malformed or oversized frame is logged with the peer address and closes this connection only. When
the connection dies every pending request fails with :class:`ConnectionClosed` chained to the cause.
Back-pressure: when the transport's write buffer is over its high-water mark, reading pauses until
it drains; in-flight requests beyond ``max_inflight`` are answered SYSTEM_BUSY straight away.
Fairness: a connection handles at most two reads per loop turn. uvloop (libuv) reads a socket up
to 32 times per poll while each read fills its buffer, so a pipelined producer could hold the
loop for hundreds of milliseconds (megabytes of sends) while the reput, timers and every other
connection wait; a second read in one turn pauses reading until the loop has turned.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final, cast

import structlog

from rocketpy.common.aio import TaskSet
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import CodecError, ConnectionClosed, RequestTimeout
from rocketpy.remoting.protocol.command import RPC_TYPE_RESPONSE, RemotingCommand
from rocketpy.remoting.protocol.frame import (
    LENGTH,
    FrameLimits,
    decode_frame_in,
    encode_frame,
    read_length,
)
from rocketpy.remoting.transport.dispatch import (
    Deferred,
    DeferredAnswer,
    ProcessorRegistry,
    RequestContext,
    RunProcessor,
    Settled,
    deferred_answer,
    dispatch,
    dispatch_nowait,
    dispatch_run,
)

log = structlog.get_logger(__name__)

#: Told an :meth:`Connection.invoke_then` request's response, or why none came.
ReplyHandler = Callable[[RemotingCommand | BaseException], None]

OVERLOAD_REMARK: Final = "[OVERLOAD]system busy, start flow control for a while"
_COMPACT_AT: Final = 256 * 1024
#: Frames queued before they are written without waiting for the end of the loop turn. One
#: write per turn would make a pipelined peer and this side take turns (each idle while the
#: other works through a whole window); writing in slices lets both work at once.
#: Answers to the frames of one read are written together at the end of the read instead.
WRITE_SLICE_FRAMES: Final = 8


class Connection(asyncio.Protocol):
    """A framed remoting connection (either side)."""

    def __init__(
        self,
        registry: ProcessorRegistry | None,
        *,
        limits: FrameLimits,
        max_inflight: int,
        on_closed: Callable[[Connection], None] | None = None,
        name: str = "remoting",
    ) -> None:
        self._registry = registry
        self._limits = limits
        self._max_inflight = max_inflight
        self._on_closed = on_closed
        self._name = name
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._pos = 0
        self._need = 0
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        #: opaque -> the handler of an :meth:`invoke_then` request (its future has no waiter).
        self._on_reply: dict[int, ReplyHandler] = {}
        #: (deadline, future, timeout, code, opaque) of invoke()s in non-decreasing deadline
        #: order.
        self._deadlines: deque[tuple[float, asyncio.Future[RemotingCommand], float, int, int]] = (
            deque()
        )
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._write_paused = False
        #: A read was handled in this loop turn / reading is paused until the turn ends.
        self._turn_read = False
        self._turn_paused = False
        self._loop: asyncio.AbstractEventLoop | None = None
        #: True while data_received decodes a read: answers wait for its one write.
        self._reading = False
        self._closed = False
        self._close_cause: BaseException | None = None
        self._tasks = TaskSet(f"{name}/request")
        #: Requests answered by a Deferred's settle (dispatch_nowait), in flight.
        self._deferred: set[Deferred] = set()
        self._ctx = RequestContext(channel=self)
        self._peer = "?"
        self.last_active = time.monotonic()
        self.closed_event = asyncio.Event()

    # -- Channel protocol ------------------------------------------------------------------------

    @property
    def peer(self) -> str:
        """``host:port`` of the remote end."""
        return self._peer

    @property
    def is_closed(self) -> bool:
        """True once the connection is closed or closing."""
        return self._closed

    @property
    def inflight(self) -> int:
        """Requests from the peer being processed now."""
        return len(self._tasks) + len(self._deferred)

    def send_response(self, response: RemotingCommand) -> None:
        """Queue any command for writing; silently dropped once the connection is closed."""
        if not self._closed:
            self._send_frame(encode_frame(response))

    def _send_frame(self, frame: bytes) -> None:
        """Queue a whole encoded frame (open connection)."""
        out = self._out
        out.append(frame)
        # While data_received handles a read, what the read answers waits for its one write
        # (a write costs as much as handling a few sends; as the reference hot path does).
        if len(out) >= WRITE_SLICE_FRAMES and not self._reading:
            self._write_out()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send ``request`` and await the response with the same opaque.

        Raises:
            RequestTimeout: no response within ``timeout_s``.
            ConnectionClosed: the connection is or became closed.
        """
        fut = self.invoke_future(request, timeout_s)
        try:
            return await fut
        finally:
            if self._pending.get(request.opaque) is fut:
                del self._pending[request.opaque]

    def invoke_future(
        self, request: RemotingCommand, timeout_s: float
    ) -> asyncio.Future[RemotingCommand]:
        """:meth:`invoke` without a coroutine: the future the response completes (or
        :class:`RequestTimeout` after ``timeout_s``, or :class:`ConnectionClosed`). For a caller
        that handles the answer in a done callback (a DLedger leader's pushes: one task per
        push cost more than the push).

        Raises:
            ConnectionClosed: the connection is closed.
        """
        if self._closed:
            raise ConnectionClosed(f"connection to {self._peer} is closed") from self._close_cause
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        opaque = request.opaque
        self._pending[opaque] = fut
        deadline = loop.time() + timeout_s
        deadlines = self._deadlines
        if not deadlines or deadline >= deadlines[-1][0]:
            # The usual case (one timeout per connection's callers): in deadline order, expired
            # by the one shared timer -- no timer per request.
            deadlines.append((deadline, fut, timeout_s, request.code, opaque))
            if self._deadline_timer is None:
                self._deadline_timer = loop.call_at(deadline, self._expire_due)
        else:
            # Out of order: a timer of its own (left to fire as a no-op once answered).
            loop.call_at(deadline, self._expire, fut, timeout_s, request.code, opaque)
        self.send_response(request)
        return fut

    def invoke_then(
        self, request: RemotingCommand, timeout_s: float, on_reply: ReplyHandler
    ) -> None:
        """:meth:`invoke_future` answered through ``on_reply``, called once: with the response,
        from the read that brings it (a future's done callback would run a loop turn later,
        after the next poll's reads), or with :class:`RequestTimeout` /
        :class:`ConnectionClosed`. A DLedger leader's pushes: their answers commit sends.

        Raises:
            ConnectionClosed: the connection is closed (``on_reply`` is never called).
        """
        self.invoke_future(request, timeout_s)
        self._on_reply[request.opaque] = on_reply

    def _fail(
        self,
        fut: asyncio.Future[RemotingCommand],
        on_reply: ReplyHandler | None,
        err: BaseException,
    ) -> None:
        """A request that gets no response: its future fails, or, for an :meth:`invoke_then`
        request, its handler is told (the future, which nobody awaits, is cancelled: no
        unretrieved exception)."""
        if on_reply is None:
            fut.set_exception(err)
        else:
            fut.cancel()
            self._reply_to(on_reply, err)

    def _reply_to(self, on_reply: ReplyHandler, reply: RemotingCommand | BaseException) -> None:
        try:
            on_reply(reply)
        except Exception:  # the read goes on: a handler's bug must not kill the connection
            log.exception("response handler failed", peer=self._peer)

    def _expire(
        self, fut: asyncio.Future[RemotingCommand], timeout_s: float, code: int, opaque: int
    ) -> None:
        if not fut.done():
            err = RequestTimeout(
                f"wait response on {self._peer} timeout, {timeout_s * 1000:.0f}ms, code {code}"
            )
            self._fail(fut, self._on_reply.pop(opaque, None) if self._on_reply else None, err)
        if self._pending.get(opaque) is fut:
            del self._pending[opaque]

    def _expire_due(self) -> None:
        """The shared timer: fail due requests, drop answered ones, re-arm for the oldest one
        still waiting (answered entries are dropped whatever their deadline, so it fires about
        once per timeout, not once per request)."""
        self._deadline_timer = None
        deadlines = self._deadlines
        now = asyncio.get_running_loop().time()
        while deadlines:
            deadline, fut, timeout_s, code, opaque = deadlines[0]
            if not fut.done():
                if deadline > now:
                    self._deadline_timer = asyncio.get_running_loop().call_at(
                        deadline, self._expire_due
                    )
                    return
                self._expire(fut, timeout_s, code, opaque)
            deadlines.popleft()

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send a oneway request (flag bit 1 set); nothing comes back."""
        request.flag |= 0b10
        self.send_response(request)

    def close(self) -> None:
        """Close the connection after flushing what is queued (idempotent)."""
        if self._transport is not None and not self._transport.is_closing():
            self._flush()
            self._transport.close()
        self._closed = True

    def abort(self) -> None:
        """Drop the connection at once."""
        if self._transport is not None:
            self._transport.abort()
        self._closed = True

    async def wait_idle(self, timeout_s: float) -> None:
        """Wait (bounded) until no request from the peer is in flight."""
        deadline = time.monotonic() + timeout_s
        while self.inflight and time.monotonic() < deadline:  # noqa: ASYNC110 - bounded drain
            await asyncio.sleep(0.01)

    async def cancel_requests(self) -> None:
        """Cancel requests still in flight (shutdown)."""
        for deferred in list(self._deferred):
            deferred.cancel()
        self._deferred.clear()
        await self._tasks.cancel_all()

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Remember the transport and the peer address."""
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)
        self._loop = asyncio.get_running_loop()
        peer = self._transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self._peer = f"{peer[0]}:{peer[1]}"

    def data_received(self, data: bytes) -> None:
        """Append bytes and handle every complete frame."""
        self.last_active = time.monotonic()
        buf = self._buf
        buf += data
        self._reading = True
        try:
            self._drain_frames()
        except CodecError as e:
            log.warning(
                "decode error, closing channel", peer=self._peer, error=str(e), name=self._name
            )
            self._fail_pending(e)
            # The answers to the frames before the bad one still go out (their sends are
            # stored); nothing more is read.
            self.close()
            return
        finally:
            self._reading = False
        if self._pos >= _COMPACT_AT or self._pos == len(buf):
            del buf[: self._pos]
            self._pos = 0
        if self._out:
            # What these frames answered goes out now, not a loop turn later (one epoll and
            # one turn less per request when few are in flight).
            self._write_out()
        if not self._turn_read:
            self._turn_read = True
            if self._loop is not None:
                self._loop.call_soon(self._turned)
        elif (
            not self._turn_paused
            and self._transport is not None
            and not self._transport.is_closing()
        ):
            # A second read in this turn: let the loop turn before the next one.
            self._turn_paused = True
            self._transport.pause_reading()

    def _turned(self) -> None:
        """The loop turned since this connection's first read of the last turn."""
        self._turn_read = False
        if self._turn_paused:
            self._turn_paused = False
            transport = self._transport
            if not self._write_paused and transport is not None and not transport.is_closing():
                transport.resume_reading()

    def _drain_frames(self) -> None:
        buf = self._buf
        cmds: list[RemotingCommand] = []
        pos, need, end = self._pos, self._need, len(buf)  # locals per frame, stored back once
        try:
            while True:
                if need == 0:
                    if end - pos < 4:
                        return
                    need = read_length(buf, self._limits, pos)
                if end - pos < 4 + need:
                    return
                start = pos + 4
                pos = start + need  # past the frame before it decodes: a bad one is consumed
                need = 0
                cmds.append(decode_frame_in(buf, start, pos))  # in place: no frame copy
        finally:
            self._pos, self._need = pos, need
            # The frames before a malformed one are still handled (then the channel closes).
            if cmds:
                self._handle(cmds)

    def _handle(self, cmds: list[RemotingCommand]) -> None:
        """Handle the commands of one read in order; consecutive requests of a code with a
        run form (``ProcessorRegistry.lookup_run``) go to it together."""
        registry = self._registry
        i, n = 0, len(cmds)
        while i < n and not self._closed:
            cmd = cmds[i]
            run = None
            if registry is not None and i + 1 < n and not cmd.flag & RPC_TYPE_RESPONSE:
                run = registry.lookup_run(cmd.code)
            if run is None:
                self._on_command(cmd)
                i += 1
                continue
            end = i + 1
            code = cmd.code
            while end < n and cmds[end].code == code and not cmds[end].flag & RPC_TYPE_RESPONSE:
                end += 1
            i = self._on_run(run, cmds, i, end)

    def _on_run(self, run: RunProcessor, cmds: list[RemotingCommand], i: int, end: int) -> int:
        """Requests ``cmds[i:end]`` (one code) through ``run``: where it stops, that request
        goes alone and the run goes on after it; once it answers none, the rest go alone.
        Returns ``end``."""
        while i < end and not self._closed:
            if end - i < 2 or self.inflight >= self._max_inflight:
                break
            batch = cmds[i:end]
            settled = dispatch_run(run, self._ctx, batch)
            if not settled:
                break
            for request, result in zip(batch, settled, strict=False):
                if type(result) is bytes and not self._closed:
                    # A stored send's frame: data_received writes what its read answered.
                    self._out.append(result)
                else:
                    self._deliver(request, result)
            i += len(settled)
            if i < end:  # the run stopped at this request: it goes alone
                self._on_command(cmds[i])
                i += 1
        while i < end and not self._closed:
            self._on_command(cmds[i])
            i += 1
        return end

    def _on_response(self, cmd: RemotingCommand) -> None:
        fut = self._pending.pop(cmd.opaque, None)
        if fut is None:
            log.warning(
                "receive response, but not matched any request",
                peer=self._peer,
                opaque=cmd.opaque,
                code=cmd.code,
            )
        elif not fut.done():
            fut.set_result(cmd)
            if self._on_reply:
                on_reply = self._on_reply.pop(cmd.opaque, None)
                if on_reply is not None:
                    self._reply_to(on_reply, cmd)

    def _on_command(self, cmd: RemotingCommand) -> None:
        if cmd.flag & RPC_TYPE_RESPONSE:
            self._on_response(cmd)
            return
        if self._registry is None:
            if not cmd.is_oneway:
                self.send_response(
                    cmd.make_response(
                        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                        f" request type {cmd.code} not supported",
                    )
                )
            return
        if self.inflight >= self._max_inflight:
            if not cmd.is_oneway:
                self.send_response(cmd.make_response(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK))
            return
        nowait = self._registry.lookup_nowait(cmd.code)
        if nowait is None:
            self._tasks.spawn(self._process(cmd))
            return
        # The synchronous fast path: answered here, no task unless the processor must wait.
        self._deliver(cmd, dispatch_nowait(nowait, self._ctx, cmd))

    def _deliver(self, cmd: RemotingCommand, result: Settled) -> None:
        """Write, or arrange to write, what dispatching ``cmd`` settled on."""
        if result is None:
            return
        if isinstance(result, bytes):
            if not self._closed:
                self._send_frame(result)
        elif isinstance(result, RemotingCommand):
            self.send_response(result)
        elif isinstance(result, Deferred):
            # Done but for an acknowledgement: answered from the settling call, no task.
            self._deferred.add(result)
            result.then(functools.partial(self._deferred_done, cmd, result))
        else:
            self._tasks.spawn(self._finish(result))

    def _deferred_done(
        self, cmd: RemotingCommand, deferred: Deferred, answer: DeferredAnswer
    ) -> None:
        self._deferred.discard(deferred)
        self._write_answer(deferred_answer(self._ctx, cmd, answer))

    def _write_answer(self, response: RemotingCommand | bytes | None) -> None:
        """A processor's answer given later: its frame, a command, or None (nothing)."""
        if isinstance(response, bytes):
            if not self._closed:
                self._send_frame(response)
        elif response is not None:
            self.send_response(response)

    async def _process(self, cmd: RemotingCommand) -> None:
        assert self._registry is not None  # noqa: S101 - checked by the caller
        response = await dispatch(self._registry, self._ctx, cmd)
        if response is not None:
            self.send_response(response)

    async def _finish(self, pending: Awaitable[RemotingCommand | None]) -> None:
        response = await pending
        if response is not None:
            self.send_response(response)

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._write_out()

    def flush(self) -> None:
        """Write what is queued now, not at the end of the loop turn. For a caller that
        queued a burst of requests from a task: the scheduled flush would run a turn later,
        after the next poll's reads (a DLedger leader's pushes, on every send's way)."""
        self._write_out()

    def _write_out(self) -> None:
        if not self._out or self._transport is None or self._transport.is_closing():
            self._out.clear()
            return
        out = self._out
        self._out = []
        self._transport.write(out[0] if len(out) == 1 else b"".join(out))
        self.last_active = time.monotonic()

    def pause_writing(self) -> None:
        """The peer reads slower than we write: stop reading new requests until it catches up."""
        self._write_paused = True
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        """The write buffer drained below its low-water mark."""
        self._write_paused = False
        if (
            not self._turn_paused
            and self._transport is not None
            and not self._transport.is_closing()
        ):
            self._transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail pending requests, notify the owner."""
        self._closed = True
        self._close_cause = exc
        self._fail_pending(exc)
        self._out.clear()
        self.closed_event.set()
        if self._on_closed is not None:
            self._on_closed(self)

    def _fail_pending(self, cause: BaseException | None) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        self._deadlines.clear()
        pending = self._pending
        self._pending = {}
        handlers = self._on_reply
        self._on_reply = {}
        for opaque, fut in pending.items():
            if not fut.done():
                err = ConnectionClosed(f"connection to {self._peer} closed")
                err.__cause__ = cause
                self._fail(fut, handlers.get(opaque), err)


__all__ = ["LENGTH", "OVERLOAD_REMARK", "Connection", "ReplyHandler"]
