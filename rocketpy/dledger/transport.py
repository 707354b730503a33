"""Peer RPC of a DLedger group over remoting: request codes, outbound queues, inbound processors.

Owns: :class:`DLedgerRequestCode` (upstream numbering), the mapping of each Raft message to a
code, :class:`PeerTransport` (one bounded outbound queue and one sender task per peer over a
:class:`RemotingClient`) and the processors installed on the owner's
:class:`ProcessorRegistry`. Must not: interpret messages (the core does) or block the driver:
:meth:`PeerTransport.send` never awaits.

Mirrors openmessaging/dledger ``DLedgerRpcNettyService`` (request codes, one remoting server for
peers and clients, the group carried in every request) with one deviation: every message, the
responses included, travels as a *oneway* remoting request with the code of its family (a
``VoteResponse`` goes back as a VOTE request). The core is message-driven (etcd style), so no
request/response correlation is needed, replies never wait on the sender's connection, and
appends pipeline freely. Raft tolerates the loss this allows: a full queue or a dead peer drops
messages, and the core's heartbeats and probes resend what matters.

Wire (ours, not DLedger's JSON): code = :class:`DLedgerRequestCode`, ``extFields`` =
``{"group": <group>}``, body = :func:`rocketpy.dledger.messages.encode_message`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Final

import structlog

from rocketpy.common.errors import CodecError, RemotingError
from rocketpy.dledger.messages import Message, MessageType, decode_message, encode_message
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.dispatch import ProcessorRegistry, RequestContext

log = structlog.get_logger(__name__)

#: Messages queued per peer before new ones are dropped (the core resends).
MAX_QUEUED_PER_PEER: Final = 4096
GROUP_FIELD: Final = "group"


class DLedgerRequestCode(IntEnum):
    """openmessaging/dledger ``DLedgerRequestCode`` (INSTALL_SNAPSHOT: DLedger 0.3+)."""

    METADATA = 50000
    APPEND = 50001
    GET = 50002
    VOTE = 51001
    HEART_BEAT = 51002
    PULL = 51003
    PUSH = 51004
    LEADERSHIP_TRANSFER = 51005
    INSTALL_SNAPSHOT = 51006


_CODE_OF: Final[dict[MessageType, DLedgerRequestCode]] = {
    MessageType.VOTE: DLedgerRequestCode.VOTE,
    MessageType.VOTE_RESPONSE: DLedgerRequestCode.VOTE,
    MessageType.HEARTBEAT: DLedgerRequestCode.HEART_BEAT,
    MessageType.HEARTBEAT_RESPONSE: DLedgerRequestCode.HEART_BEAT,
    MessageType.APPEND: DLedgerRequestCode.PUSH,
    MessageType.APPEND_RESPONSE: DLedgerRequestCode.PUSH,
    MessageType.INSTALL_SNAPSHOT: DLedgerRequestCode.INSTALL_SNAPSHOT,
    MessageType.INSTALL_SNAPSHOT_RESPONSE: DLedgerRequestCode.INSTALL_SNAPSHOT,
    MessageType.TAKE_LEADERSHIP: DLedgerRequestCode.LEADERSHIP_TRANSFER,
}
#: Codes the peer protocol listens on.
PEER_CODES: Final = frozenset(_CODE_OF.values())


def code_for(message: Message) -> DLedgerRequestCode:
    """The request code ``message`` travels under."""
    return _CODE_OF[message.TYPE]


def encode_command(group: str, message: Message) -> RemotingCommand:
    """A oneway remoting request carrying ``message``."""
    return RemotingCommand.request(
        code_for(message),
        {GROUP_FIELD: group},
        encode_message(message),
        oneway=True,
    )


def decode_command(group: str, request: RemotingCommand) -> Message:
    """The message in ``request``.

    Raises:
        CodecError: wrong group, missing or undecodable body, or a code that does not match the
            message type.
    """
    their_group = request.ext(GROUP_FIELD)
    if their_group != group:
        raise CodecError(f"group {their_group!r} is not {group!r}", field=GROUP_FIELD)
    if not request.body:
        raise CodecError("empty body", field="body")
    message = decode_message(request.body)
    if code_for(message) != request.code:
        raise CodecError(
            f"message type {message.TYPE.name} under code {request.code}", field="code"
        )
    return message


class PeerTransport:
    """Sends the core's messages to peers and hands received ones to ``on_message``.

    Args:
        group: ``controllerDLegerGroup``; requests of another group are refused.
        self_id: this member's id (for logs).
        peers: every member id -> ``host:port`` (this member included).
        on_message: called on the loop with each message received, in arrival order.
        connect_timeout_s: budget of one connect; a peer that fails is retried after
            ``retry_backoff_s`` and its queued messages are dropped meanwhile.
    """

    def __init__(
        self,
        *,
        group: str,
        self_id: str,
        peers: Mapping[str, str],
        on_message: Callable[[Message], None],
        connect_timeout_s: float = 1.0,
        retry_backoff_s: float = 0.1,
    ) -> None:
        self._group = group
        self._self_id = self_id
        self._peers = dict(peers)
        self._on_message = on_message
        self._retry_backoff_s = retry_backoff_s
        self._client = RemotingClient(
            connect_timeout_s=connect_timeout_s, name=f"dledger-{self_id}/client"
        )
        self._queues: dict[str, asyncio.Queue[Message]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._dropped = 0

    @property
    def dropped(self) -> int:
        """Messages dropped because a queue was full or a peer unreachable."""
        return self._dropped

    def register(self, registry: ProcessorRegistry) -> None:
        """Route every peer code of ``registry`` to this transport."""
        for code in PEER_CODES:
            registry.register(code, self._process)

    async def _process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        # Synchronous up to the return, so messages reach the core in arrival order.
        self._on_message(decode_command(self._group, request))
        return request.make_response()

    def start(self) -> None:
        """Start one sender task per peer."""
        for peer, addr in self._peers.items():
            if peer == self._self_id or peer in self._queues:
                continue
            queue: asyncio.Queue[Message] = asyncio.Queue(MAX_QUEUED_PER_PEER)
            self._queues[peer] = queue
            task = asyncio.get_running_loop().create_task(
                self._sender(peer, addr, queue), name=f"dledger-{self._self_id}/send-{peer}"
            )
            task.add_done_callback(_log_failure)
            self._tasks.append(task)

    def send(self, message: Message) -> None:
        """Queue ``message`` for its peer; dropped (and counted) when the queue is full."""
        queue = self._queues.get(message.to_id)
        if queue is None:
            self._dropped += 1
            return
        try:
            queue.put_nowait(message)
        except asyncio.QueueFull:
            self._dropped += 1

    async def _sender(self, peer: str, addr: str, queue: asyncio.Queue[Message]) -> None:
        """Drain ``queue`` to ``addr`` in order; on a failed connect drop and back off."""
        down = False
        while True:
            first = await queue.get()
            try:
                conn = await self._client.connection(addr)
            except RemotingError as e:
                if not down:
                    log.warning("dledger peer unreachable", peer=peer, address=addr, error=str(e))
                down = True
                self._drop_all(queue, 1)
                await asyncio.sleep(self._retry_backoff_s)
                continue
            if down:
                log.info("dledger peer reachable", peer=peer, address=addr)
                down = False
            batch = [first]
            while not queue.empty():
                batch.append(queue.get_nowait())
            for message in batch:
                conn.invoke_oneway(encode_command(self._group, message))
            # Let the batch be written before taking more: one write per loop iteration.
            await asyncio.sleep(0)

    def _drop_all(self, queue: asyncio.Queue[Message], already: int) -> None:
        dropped = already
        while not queue.empty():
            queue.get_nowait()
            dropped += 1
        self._dropped += dropped

    async def stop(self) -> None:
        """Cancel the senders and close every peer connection (idempotent)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        self._queues.clear()
        await self._client.close()


def _log_failure(task: asyncio.Task[None]) -> None:
    """A sender only ends by cancellation; anything else is a bug worth a loud line."""
    if not task.cancelled() and task.exception() is not None:
        log.error("dledger sender failed", task=task.get_name(), exc_info=task.exception())
