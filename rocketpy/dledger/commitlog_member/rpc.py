"""DLedger 0.3.1.2's peer RPC on our remoting transport (dledger-commitlog.md section 2.1).

Owns: the member's :class:`RemotingServer` on its ``dLegerPeers`` port, the processors for the
codes the 0.3.1.2 server answers, and the client side: one request -> one response with the same
opaque, JSON body, no ``extFields``, 3000 ms timeout. The response's remoting code is always 200;
the outcome travels in the body's ``code``. Mirrors ``DLedgerRpcNettyService``.
Must not: interpret bodies (:class:`PeerHandler` does). Why not :mod:`rocketpy.dledger.transport`:
that one sends every message oneway with msgpack bodies (the controller's etcd-style core); here
a Java peer must understand every byte. Its :class:`DLedgerRequestCode` numbering is shared.
PULL (51003) is registered and, as upstream's handler returns null, never answered;
INSTALL_SNAPSHOT (51006, 0.4 only) is not registered.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import structlog

from rocketpy.common.errors import CodecError, RemotingError
from rocketpy.dledger.commitlog_member.protocol import (
    AppendEntryRequest,
    AppendEntryResponse,
    Base,
    Body,
    GetEntriesRequest,
    GetEntriesResponse,
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataRequest,
    MetadataResponse,
    PushEntryRequest,
    PushEntryResponse,
    VoteRequest,
    VoteResponse,
    decode_body,
    encode_body,
)
from rocketpy.dledger.transport import DLedgerRequestCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.connection import Connection
from rocketpy.remoting.transport.dispatch import (
    Deferred,
    NowaitResult,
    ProcessorRegistry,
    RequestContext,
)
from rocketpy.remoting.transport.server import RemotingServer

log = structlog.get_logger(__name__)

_R = TypeVar("_R", bound=Base)


class PeerHandler(Protocol):
    """What the member answers (``DLedgerProtocolHandler`` + client protocol)."""

    async def handle_metadata(self, request: MetadataRequest) -> MetadataResponse: ...
    async def handle_append(self, request: AppendEntryRequest) -> AppendEntryResponse: ...
    async def handle_get(self, request: GetEntriesRequest) -> GetEntriesResponse: ...
    async def handle_vote(self, request: VoteRequest) -> VoteResponse: ...
    async def handle_heart_beat(self, request: HeartBeatRequest) -> HeartBeatResponse: ...
    async def handle_leadership_transfer(
        self, request: LeadershipTransferRequest
    ) -> LeadershipTransferResponse: ...

    def handle_push(self, request: PushEntryRequest) -> asyncio.Future[PushEntryResponse]:
        """Registers the push synchronously (arrival order) and returns the future of its
        answer (done already when the push was applied at once)."""
        ...


class PeerRpc:
    """Server and client of one member's peer port."""

    def __init__(
        self,
        *,
        self_id: str,
        address: str,
        peers: dict[str, str],
        rpc_timeout_ms: int,
        max_inflight_per_connection: int = 1024,
    ) -> None:
        """``max_inflight_per_connection``: requests of one peer connection in progress before
        the transport answers SYSTEM_BUSY (a leader's push window must fit under it)."""
        self._self_id = self_id
        self._peers = peers
        self._timeout_s = rpc_timeout_ms / 1000
        host, _, port = address.rpartition(":")
        self._registry = ProcessorRegistry()
        self._server = RemotingServer(
            self._registry,
            host=host,
            port=int(port),
            name=f"dledger-{self_id}/peer",
            max_inflight_per_connection=max_inflight_per_connection,
        )
        self._client = RemotingClient(
            connect_timeout_s=min(1.0, self._timeout_s), name=f"dledger-{self_id}/client"
        )

    @property
    def port(self) -> int:
        return self._server.port

    def install(self, handler: PeerHandler) -> None:
        """Route every 0.3.1.2 code to ``handler``."""
        self._unary(DLedgerRequestCode.METADATA, MetadataRequest, handler.handle_metadata)
        self._unary(DLedgerRequestCode.APPEND, AppendEntryRequest, handler.handle_append)
        self._unary(DLedgerRequestCode.GET, GetEntriesRequest, handler.handle_get)
        self._unary(DLedgerRequestCode.VOTE, VoteRequest, handler.handle_vote)
        self._unary(DLedgerRequestCode.HEART_BEAT, HeartBeatRequest, handler.handle_heart_beat)
        self._unary(
            DLedgerRequestCode.LEADERSHIP_TRANSFER,
            LeadershipTransferRequest,
            handler.handle_leadership_transfer,
        )

        async def pull(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
            return None  # upstream's handlePull returns null: no response is written

        self._registry.register(DLedgerRequestCode.PULL, pull)

        def push_nowait(ctx: RequestContext, request: RemotingCommand) -> NowaitResult:
            # No task per push: answered now when applied at once, else from the answer's
            # done callback (a follower with 1000 pushes in flight held 1000 tasks).
            answer = handler.handle_push(decode_body(request.body or b"", PushEntryRequest))
            if answer.done():
                return _push_response(request, answer)
            response = Deferred()
            answer.add_done_callback(functools.partial(_settle_push, request, response))
            return response

        async def push(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
            answer = handler.handle_push(decode_body(request.body or b"", PushEntryRequest))
            await answer
            return _push_response(request, answer)

        self._registry.register(DLedgerRequestCode.PUSH, push, nowait=push_nowait)

    def _unary(
        self,
        code: DLedgerRequestCode,
        kind: type[_R],
        fn: Callable[[_R], Awaitable[Base]],
    ) -> None:
        async def processor(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            body = decode_body(request.body or b"", kind)
            response = await fn(body)
            return request.make_response(200, body=encode_body(response))  # type: ignore[arg-type]

        self._registry.register(code, processor)

    async def start(self) -> None:
        await self._server.start()

    async def stop(self) -> None:
        await self._client.close()
        await self._server.stop(timeout_s=2.0)

    async def invoke(
        self,
        code: DLedgerRequestCode,
        request: Body,
        kind: type[_R],
        timeout_s: float | None = None,
    ) -> _R | None:
        """Send ``request`` to its ``remoteId`` and decode the answer; None on a network error,
        a timeout, a non-200 remoting code or an undecodable body (callers treat None as
        upstream treats a failed future or a null response)."""
        return await self.invoke_raw(
            code, request.remote_id or "", encode_body(request), kind, timeout_s
        )

    async def invoke_raw(
        self,
        code: DLedgerRequestCode,
        remote_id: str,
        body: bytes,
        kind: type[_R],
        timeout_s: float | None = None,
    ) -> _R | None:
        """:meth:`invoke` with the request body already encoded (the pusher's APPEND pushes,
        :mod:`.push_codec`) for peer ``remote_id``."""
        addr = self._peers.get(remote_id)
        if addr is None:
            return None
        command = RemotingCommand.request(code, None, body)
        timeout = timeout_s or self._timeout_s
        try:
            conn = self._client.connection_nowait(addr)
            if conn is not None:  # connected: no connect deadline to arm
                reply = await conn.invoke(command, timeout)
            else:
                reply = await self._client.invoke(addr, command, timeout)
        except RemotingError as e:
            log.debug("dledger rpc failed", code=int(code), peer=remote_id, error=str(e))
            return None
        return _decoded(code, reply, kind)

    def invoke_raw_soon(
        self,
        code: DLedgerRequestCode,
        remote_id: str,
        body: bytes,
        kind: type[_R],
        on_reply: Callable[[_R | None], None],
    ) -> Connection | None:
        """:meth:`invoke_raw` without a coroutine, over an open connection to the peer:
        ``on_reply`` gets what :meth:`invoke_raw` would return, from the read that brings the
        response (``Connection.invoke_then``: no loop turn in between). Returns the
        connection the request went out on; None, with nothing sent, when no connection is
        open (the caller awaits :meth:`invoke_raw`, which connects). The leader's APPEND
        pushes: a task per push cost more than the push."""
        conn = self.open_connection(remote_id)
        if conn is None:
            return None
        command = RemotingCommand.request(code, None, body)

        def replied(reply: RemotingCommand | BaseException) -> None:
            if isinstance(reply, BaseException):
                log.debug("dledger rpc failed", code=int(code), peer=remote_id, error=str(reply))
                on_reply(None)
                return
            on_reply(_decoded(code, reply, kind))

        try:
            conn.invoke_then(command, self._timeout_s, replied)
        except RemotingError:
            return None
        return conn

    def open_connection(self, remote_id: str) -> Connection | None:
        """The open connection to peer ``remote_id``, if any (never connects)."""
        addr = self._peers.get(remote_id)
        return None if addr is None else self._client.connection_nowait(addr)


def _decoded(code: DLedgerRequestCode, reply: RemotingCommand, kind: type[_R]) -> _R | None:
    """A reply's body as ``kind``; None for a non-200 remoting code, no body or a body that
    does not decode (logged)."""
    if reply.code != 200 or not reply.body:
        return None
    try:
        return decode_body(reply.body, kind)
    except CodecError as e:
        log.warning("dledger rpc bad response", code=int(code), error=str(e))
        return None


def _push_response(
    request: RemotingCommand, answer: asyncio.Future[PushEntryResponse]
) -> RemotingCommand:
    """The response to push ``request`` from its done ``answer`` (a failed answer raises, and
    the dispatcher maps the error to a response)."""
    return request.make_response(200, body=encode_body(answer.result()))


def _settle_push(
    request: RemotingCommand,
    response: Deferred,
    answer: asyncio.Future[PushEntryResponse],
) -> None:
    """Settle ``response`` from push ``request``'s ``answer`` (its done callback)."""
    if answer.cancelled():  # the member stopped: nothing is written
        response.settle(None)
        return
    try:
        response.settle(_push_response(request, answer))
    except Exception as e:  # noqa: BLE001 - the dispatcher maps it to a response
        response.settle(e)
