"""Processor registry by request code, and the one boundary where errors become response codes.

Owns: :class:`RequestContext` (what a processor knows of the request's connection), the
:data:`Processor` signature, :class:`ProcessorRegistry`, and :func:`dispatch`, which turns a
processor's result or exception into the response upstream's
``NettyRemotingAbstract.processRequestCommand`` would send (remoting.md section 5.1). Must not:
touch sockets directly (the connection object does).

A processor returns the response command, or ``None`` when it answers later itself through
``ctx.send_response`` (long polling) or when the request is oneway. A code may also have a
:data:`NowaitProcessor`: a plain function the connection calls straight from the frame decoder,
returning the response (no task, no coroutine: the send hot path) -- as a command, or already
encoded as its whole frame (``bytes``: a stored send's answer from a template, with the request's
opaque) -- or, when it must wait, an awaitable the connection runs as a contained task
(:func:`dispatch_nowait`). A :class:`Deferred` is the exception: its work is done but for an
acknowledgement (a DLedger quorum, a follower's push), and the connection answers from the call
that settles it, with no task.
A code may also have a :data:`RunProcessor` for the requests of it that arrive one after another
in one read (the send lane): one call answers as many as it can at once, sharing per read what a
request would do for itself (:func:`dispatch_run`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from rocketpy.common.codes import ResponseCode, request_code_name
from rocketpy.common.errors import CodecError, ControllerError, RemoteError, RocketPyError
from rocketpy.remoting.protocol.command import RPC_ONEWAY, RemotingCommand

log = structlog.get_logger(__name__)


class Channel(Protocol):
    """The connection a request arrived on, as processors see it."""

    @property
    def peer(self) -> str:
        """``host:port`` of the remote end."""
        ...

    @property
    def is_closed(self) -> bool:
        """True once the connection is closed."""
        ...

    def send_response(self, response: RemotingCommand) -> None:
        """Queue a response (or any command) for writing; dropped if the connection is closed."""
        ...

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request to the peer on this connection and await its response."""
        ...

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send a oneway request to the peer on this connection."""
        ...

    def close(self) -> None:
        """Close the connection (idempotent)."""
        ...


@dataclass(slots=True, frozen=True)
class RequestContext:
    """Per-request context handed to processors."""

    channel: Channel


Processor = Callable[[RequestContext, RemotingCommand], Awaitable[RemotingCommand | None]]
#: What a :class:`Deferred` is settled with: the response, its frame, None (nothing to write),
#: or the processor's failure (mapped to an error response).
DeferredAnswer = RemotingCommand | bytes | None | Exception


class Deferred:
    """A processor's answer given later by a call, not through a future: :meth:`settle`
    hands it to the connection, which queues it for writing in that same call. A future's done
    callback runs a loop turn later, and one scheduled from the ready queue only after the next
    poll's reads: a DLedger send took two of those between its quorum and its SEND_OK. Settle
    it exactly once (later calls are ignored)."""

    __slots__ = ("_answer", "_settled", "_then", "cancelled")

    def __init__(self) -> None:
        self._then: Callable[[DeferredAnswer], None] | None = None
        self._answer: DeferredAnswer = None
        self._settled = False
        #: Set by the connection at shutdown: a later answer is dropped.
        self.cancelled = False

    def settle(self, answer: DeferredAnswer) -> None:
        """Give the answer (before or after the connection took this)."""
        if self._settled or self.cancelled:
            return
        self._settled = True
        then, self._then = self._then, None
        if then is None:
            self._answer = answer  # settled before the connection asked: kept for it
        else:
            then(answer)

    def then(self, write: Callable[[DeferredAnswer], None]) -> None:
        """The connection's side: ``write(answer)`` once settled (now if it is already)."""
        if self._settled:
            answer, self._answer = self._answer, None
            write(answer)
        else:
            self._then = write

    def cancel(self) -> None:
        """Shutdown: no answer is written."""
        self.cancelled = True
        self._then = None

    async def wait(self) -> RemotingCommand | bytes | None:
        """For a caller that must await the answer (a processor's coroutine form); raises
        the processor's failure. Bounded as the settling side is (a DLedger put is answered
        within its ack wait)."""
        answered: asyncio.Future[DeferredAnswer] = asyncio.get_running_loop().create_future()

        def got(answer: DeferredAnswer) -> None:
            if not answered.done():
                answered.set_result(answer)

        self.then(got)
        answer = await answered
        if isinstance(answer, Exception):
            raise answer
        return answer


NowaitResult = RemotingCommand | bytes | None | Deferred | Awaitable[RemotingCommand | None]
#: Answers synchronously (a command or None, as a :data:`Processor`'s result, or the response's
#: whole frame) or returns an awaitable of a command or None when it has to wait, or a
#: :class:`Deferred` settled later (on a command, a frame or the failure).
NowaitProcessor = Callable[[RequestContext, RemotingCommand], NowaitResult]
#: Answers a run of requests of one code, in their order, appending to the list it is given
#: each one's result as the code's :data:`NowaitProcessor` would return it; it stops at the
#: first request it cannot answer at once, having done nothing for it (that request and the
#: rest then go one at a time).
RunProcessor = Callable[[RequestContext, Sequence[RemotingCommand], list[NowaitResult]], None]
#: What :func:`dispatch_nowait` makes of a result: the response to write (a command or its
#: frame; None: nothing), a coroutine finishing the request, or a processor's Deferred.
Settled = RemotingCommand | bytes | Coroutine[Any, Any, RemotingCommand | None] | Deferred | None


class ProcessorRegistry:
    """Request code -> processor; an optional default processor handles the rest."""

    def __init__(self) -> None:
        self._table: dict[int, Processor] = {}
        self._nowait: dict[int, NowaitProcessor] = {}
        self._run: dict[int, RunProcessor] = {}
        self._default: Processor | None = None

    def register(
        self,
        code: int,
        processor: Processor,
        *,
        nowait: NowaitProcessor | None = None,
        run: RunProcessor | None = None,
    ) -> None:
        """Route ``code`` to ``processor`` (later registrations replace earlier ones).

        ``nowait``, when given, is the same processor as a :data:`NowaitProcessor`, which the
        connection prefers (it must behave exactly as ``processor``); ``run`` (only with
        ``nowait``) the same for runs of requests, answering each as ``nowait`` would.
        """
        self._table[int(code)] = processor
        if nowait is None:
            self._nowait.pop(int(code), None)
        else:
            self._nowait[int(code)] = nowait
        if run is None or nowait is None:
            self._run.pop(int(code), None)
        else:
            self._run[int(code)] = run

    def register_default(self, processor: Processor) -> None:
        """Processor for codes without their own entry."""
        self._default = processor

    def lookup(self, code: int) -> Processor | None:
        """The processor for ``code``, else the default, else None."""
        return self._table.get(code, self._default)

    def lookup_nowait(self, code: int) -> NowaitProcessor | None:
        """The synchronous form of ``code``'s processor, if it has one."""
        return self._nowait.get(code)

    def lookup_run(self, code: int) -> RunProcessor | None:
        """The run form of ``code``'s processor, if it has one."""
        return self._run.get(code)

    def codes(self) -> frozenset[int]:
        """Codes with their own processor."""
        return frozenset(self._table)


async def dispatch(
    registry: ProcessorRegistry, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand | None:
    """Run the processor for ``request`` and return the response to write (None: nothing to write).

    Unknown code -> REQUEST_CODE_NOT_SUPPORTED with upstream's remark; a domain error -> its code
    and remark; any other exception -> SYSTEM_ERROR with a short description (no traceback on the
    wire). Oneway requests never get a response.
    """
    processor = registry.lookup(request.code)
    response: RemotingCommand | None
    if processor is None:
        log.warning(
            "request type not supported",
            code=request.code,
            name=request_code_name(request.code),
            peer=ctx.channel.peer,
        )
        response = request.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
        )
    else:
        try:
            response = await processor(ctx, request)
        except Exception as e:  # noqa: BLE001 - mapped to a response (and logged) just below
            response = _error_response(ctx, request, e)
    return _reply(request, response)


def dispatch_nowait(
    processor: NowaitProcessor, ctx: RequestContext, request: RemotingCommand
) -> Settled:
    """:func:`dispatch` for a :data:`NowaitProcessor`: the response to write (a command or its
    frame; None: nothing), or, when the processor has to wait, a coroutine that finishes the
    request as :func:`dispatch` would (the caller runs it as a task and writes its result), or
    the processor's :class:`Deferred`, whose answer the caller writes with
    :func:`deferred_answer` once settled."""
    try:
        result = processor(ctx, request)
    except Exception as e:  # noqa: BLE001 - mapped to a response (and logged) just below
        result = _error_response(ctx, request, e)
    return _settle(ctx, request, result)


def dispatch_run(
    run: RunProcessor, ctx: RequestContext, requests: Sequence[RemotingCommand]
) -> list[Settled]:
    """:func:`dispatch_nowait` for a :data:`RunProcessor`: the settled results of the first
    requests of ``requests`` it answered (maybe none; the caller dispatches the rest one at a
    time). A request whose answer raised gets the error's response; the run ends there."""
    out: list[NowaitResult] = []
    try:
        run(ctx, requests, out)
    except Exception as e:  # noqa: BLE001 - mapped to a response (and logged) just below
        out.append(_error_response(ctx, requests[len(out)], e))
    settled: list[Settled] = []
    for request, result in zip(requests, out, strict=False):  # out is a prefix
        if type(result) is bytes:  # a stored send's frame (the lane's usual answer)
            settled.append(None if request.flag & RPC_ONEWAY else result)
        else:
            settled.append(_settle(ctx, request, result))
    return settled


def _settle(ctx: RequestContext, request: RemotingCommand, result: NowaitResult) -> Settled:
    if isinstance(result, bytes):
        return None if request.is_oneway else result
    if result is None or isinstance(result, RemotingCommand):
        return _reply(request, result)
    if isinstance(result, Deferred):
        return result
    return _finish(ctx, request, result)


def deferred_answer(
    ctx: RequestContext, request: RemotingCommand, answer: DeferredAnswer
) -> RemotingCommand | bytes | None:
    """The response to write for a :class:`Deferred`'s answer, as a command or its frame
    (None: nothing); a failure becomes its error response."""
    if isinstance(answer, Exception):
        return _reply(request, _error_response(ctx, request, answer))
    if isinstance(answer, bytes):
        return None if request.is_oneway else answer
    return _reply(request, answer)


async def _finish(
    ctx: RequestContext, request: RemotingCommand, pending: Awaitable[RemotingCommand | None]
) -> RemotingCommand | None:
    try:
        response = await pending
    except Exception as e:  # noqa: BLE001 - mapped to a response (and logged) just below
        response = _error_response(ctx, request, e)
    return _reply(request, response)


def _reply(request: RemotingCommand, response: RemotingCommand | None) -> RemotingCommand | None:
    """``response`` addressed to ``request`` (its opaque); None for a oneway request or no
    response."""
    if request.is_oneway or response is None:
        return None
    response.opaque = request.opaque
    return response


def _error_response(ctx: RequestContext, request: RemotingCommand, e: Exception) -> RemotingCommand:
    """The response for a processor's exception (no traceback on the wire)."""
    if isinstance(e, RemoteError | ControllerError):
        return request.make_response(e.code, e.remark)
    if isinstance(e, CodecError | RocketPyError):
        # Bad input or a refused domain operation: a clear remark, no traceback in the log.
        log.warning("request refused", code=request.code, peer=ctx.channel.peer, error=str(e))
        return request.make_response(ResponseCode.SYSTEM_ERROR, str(e))
    log.exception("process request exception", code=request.code, peer=ctx.channel.peer, exc_info=e)
    return request.make_response(ResponseCode.SYSTEM_ERROR, _simple_desc(e))


def _simple_desc(e: BaseException) -> str:
    """Mirrors ``UtilAll.exceptionSimpleDesc``: type and message, no stack."""
    return f"{type(e).__name__}: {e}"
