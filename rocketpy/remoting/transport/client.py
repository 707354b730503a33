"""The remoting client: one cached connection per address, invoke with a deadline, oneway.

Owns: connecting (bounded by ``connect_timeout_s``), the address -> :class:`Connection` table, and
reconnecting on the next call after a connection died. With ``reconnect_backoff`` an address
whose connect failed is not dialled again until a capped, jittered, exponentially growing delay
has passed: calls meanwhile fail at once with :class:`ConnectFailed` (a dead broker costs its
callers no connect storm and no CPU spin). Requests the peer sends on a client
connection (NOTIFY_CONSUMER_IDS_CHANGED, NOTIFY_BROKER_ROLE_CHANGED, ...) are dispatched to
``registry``. Mirrors ``NettyRemotingClient`` (invokeSync / invokeOneway, channel table).
"""

from __future__ import annotations

import asyncio
import random

import structlog

from rocketpy.common.errors import ConnectFailed, ConnectionClosed
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import FrameLimits
from rocketpy.remoting.transport.connection import Connection
from rocketpy.remoting.transport.dispatch import ProcessorRegistry

log = structlog.get_logger(__name__)


def split_address(addr: str) -> tuple[str, int]:
    """``host:port`` -> (host, port).

    Raises:
        ValueError: not ``host:port``.
    """
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"bad address {addr!r}, expected host:port")
    return host.strip("[]"), int(port)


class RemotingClient:
    """Talks to any number of remoting servers."""

    def __init__(
        self,
        *,
        registry: ProcessorRegistry | None = None,
        limits: FrameLimits | None = None,
        connect_timeout_s: float = 3.0,
        max_inflight_per_connection: int = 1024,
        name: str = "remoting-client",
        reconnect_backoff: tuple[float, float] | None = None,
    ) -> None:
        """Args:
        registry: processors for requests the peer sends on these connections.
        limits: frame limits.
        connect_timeout_s: deadline of one connect.
        max_inflight_per_connection: requests outstanding per connection.
        name: for logs.
        reconnect_backoff: (first, cap) seconds to wait before dialling an address again
            after its connect failed; doubled per failure, with jitter. None: dial every time.
        """
        self._registry = registry
        self._backoff = reconnect_backoff
        # address -> (consecutive connect failures, loop time before which it is not dialled,
        # the last failure)
        self._failed: dict[str, tuple[int, float, ConnectFailed]] = {}
        self._limits = limits or FrameLimits()
        self._connect_timeout_s = connect_timeout_s
        self._max_inflight = max_inflight_per_connection
        self._name = name
        self._conns: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Task[Connection]] = {}
        self._closed = False

    def connection_nowait(self, addr: str) -> Connection | None:
        """The live connection to ``addr`` if there is one (never connects)."""
        conn = self._conns.get(addr)
        return None if conn is None or conn.is_closed else conn

    async def connection(self, addr: str) -> Connection:
        """The live connection to ``addr``, connecting if needed.

        One dial per address runs at a time, as a task of its own that every caller awaits
        through :func:`asyncio.shield`: a caller whose deadline ends the wait (a heartbeat with a
        200 ms budget) gives up alone. When the dial ran in the first caller's task, that
        caller's cancellation reached every other waiter as a CancelledError, and a periodic
        loop waiting on the same dial (a broker's controller metadata sync) ended silently: a
        paused old master then never learnt it had been replaced.

        Raises:
            ConnectionClosed: the connect failed or timed out, or the client is closed.
        """
        conn = self._conns.get(addr)
        if conn is not None and not conn.is_closed:
            return conn
        if self._closed:
            raise ConnectionClosed(f"{self._name} is closed")
        dial = self._connecting.get(addr)
        if dial is None:
            loop = asyncio.get_running_loop()
            failed = self._failed.get(addr)
            if failed is not None and loop.time() < failed[1]:
                wait = failed[1] - loop.time()
                raise ConnectFailed(f"{failed[2]} (not retried for {wait:.2f} s)")
            dial = loop.create_task(self._dial(addr), name=f"{self._name}/dial {addr}")
            dial.add_done_callback(_retrieve)
            self._connecting[addr] = dial
        return await asyncio.shield(dial)

    async def _dial(self, addr: str) -> Connection:
        """Connect to ``addr`` and keep the connection (the task behind :meth:`connection`)."""
        try:
            conn = await self._connect(addr)
        except ConnectFailed as e:
            self._note_failure(addr, e)
            raise
        finally:
            self._connecting.pop(addr, None)
        self._failed.pop(addr, None)
        if self._closed:
            conn.close()
            raise ConnectionClosed(f"{self._name} is closed")
        self._conns[addr] = conn
        return conn

    def _note_failure(self, addr: str, error: ConnectFailed) -> None:
        """Start or lengthen ``addr``'s backoff (when configured)."""
        if self._backoff is None:
            return
        first, cap = self._backoff
        count = self._failed[addr][0] + 1 if addr in self._failed else 1
        delay = min(cap, first * 2 ** min(count - 1, 16))
        delay *= 0.5 + random.random() / 2  # noqa: S311 - jitter, not security
        self._failed[addr] = (count, asyncio.get_running_loop().time() + delay, error)

    async def _connect(self, addr: str) -> Connection:
        try:
            host, port = split_address(addr)
        except ValueError as e:
            raise ConnectFailed(str(e)) from e
        loop = asyncio.get_running_loop()

        def factory() -> Connection:
            return Connection(
                self._registry,
                limits=self._limits,
                max_inflight=self._max_inflight,
                on_closed=lambda c: self._forget(addr, c),
                name=self._name,
            )

        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, conn = await loop.create_connection(factory, host, port)
        except (OSError, TimeoutError) as e:
            raise ConnectFailed(f"connect to {addr} failed: {e!r}") from e
        return conn

    def _forget(self, addr: str, conn: Connection) -> None:
        if self._conns.get(addr) is conn:
            del self._conns[addr]

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        """Send ``request`` to ``addr`` and await its response.

        Raises:
            RequestTimeout: no response within ``timeout_s`` (connect time included).
            ConnectFailed: could not connect (refused, or not within ``timeout_s``).
            ConnectionClosed: the connection died first.
        """
        try:
            async with asyncio.timeout(timeout_s):
                conn = await self.connection(addr)
        except TimeoutError as e:
            # Nothing was sent: as certain a failure as a refused connect.
            raise ConnectFailed(f"connect to {addr} not done within {timeout_s} s") from e
        return await conn.invoke(request, timeout_s)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send a oneway request to ``addr``."""
        conn = await self.connection(addr)
        conn.invoke_oneway(request)

    async def close(self) -> None:
        """Close every connection and stop dials in progress (idempotent)."""
        self._closed = True
        for dial in list(self._connecting.values()):
            dial.cancel()
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            conn.close()
        for conn in conns:
            try:
                async with asyncio.timeout(1.0):
                    await conn.closed_event.wait()
            except TimeoutError:
                conn.abort()


def _retrieve(task: asyncio.Task[Connection]) -> None:
    """Mark a dial's failure as seen: when every caller gave up before it ended, nobody
    awaited it, and asyncio would log "exception was never retrieved"."""
    if not task.cancelled():
        task.exception()
