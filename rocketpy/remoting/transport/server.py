"""The remoting server: accept connections, idle timeout, graceful stop.

Owns: the listening socket, the set of live :class:`Connection` objects, the idle scan, and the stop
sequence (stop accepting, let in-flight requests finish within the deadline, close connections).
Mirrors ``NettyRemotingServer`` (idle ``serverChannelMaxIdleTimeSeconds``, channel-close events
delivered to a housekeeping listener). Must not: know any request code (processors do).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import structlog

from rocketpy.common.aio import TaskSet
from rocketpy.remoting.protocol.frame import FrameLimits
from rocketpy.remoting.transport.connection import Connection
from rocketpy.remoting.transport.dispatch import Channel, ProcessorRegistry

log = structlog.get_logger(__name__)


class RemotingServer:
    """Serves one :class:`ProcessorRegistry` on a TCP port (0 picks a free one)."""

    def __init__(
        self,
        registry: ProcessorRegistry,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: FrameLimits | None = None,
        idle_timeout_s: float = 120.0,
        max_inflight_per_connection: int = 1024,
        on_channel_closed: Callable[[Channel], None] | None = None,
        name: str = "remoting",
    ) -> None:
        self._registry = registry
        self._host = host
        self._port = port
        self._limits = limits or FrameLimits()
        self._idle_timeout_s = idle_timeout_s
        self._max_inflight = max_inflight_per_connection
        self._on_channel_closed = on_channel_closed
        self._name = name
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._tasks = TaskSet(f"{name}/server")
        self._stopping = asyncio.Event()

    @property
    def port(self) -> int:
        """The bound port (valid after :meth:`start`)."""
        return self._port

    @property
    def address(self) -> str:
        """``host:port`` as bound."""
        return f"{self._host}:{self._port}"

    @property
    def channels(self) -> frozenset[Connection]:
        """Live connections."""
        return frozenset(self._connections)

    def _make(self) -> Connection:
        conn = Connection(
            self._registry,
            limits=self._limits,
            max_inflight=self._max_inflight,
            on_closed=self._closed,
            name=self._name,
        )
        self._connections.add(conn)
        return conn

    def _closed(self, conn: Connection) -> None:
        self._connections.discard(conn)
        if self._on_channel_closed is not None:
            try:
                self._on_channel_closed(conn)
            except Exception:
                log.exception("channel close listener failed", peer=conn.peer)

    async def start(self) -> None:
        """Bind and start accepting; returns when listening."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._make, self._host, self._port, reuse_address=True
        )
        sock = self._server.sockets[0].getsockname()
        self._port = int(sock[1])
        if self._idle_timeout_s > 0:
            self._tasks.spawn(self._idle_scan(), name=f"{self._name}/idle-scan")
        log.info("remoting server started", name=self._name, address=self.address)

    async def _idle_scan(self) -> None:
        interval = max(0.05, min(self._idle_timeout_s / 4, 10.0))
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._stopping.wait()
            now = time.monotonic()
            for conn in list(self._connections):
                if now - conn.last_active > self._idle_timeout_s and conn.inflight == 0:
                    log.info("channel idle, closing", peer=conn.peer, name=self._name)
                    conn.close()

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, wait for in-flight requests (bounded), close every connection."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.close()
        deadline = time.monotonic() + timeout_s
        for conn in list(self._connections):
            await conn.wait_idle(max(0.0, deadline - time.monotonic()))
        for conn in list(self._connections):
            await conn.cancel_requests()
            conn.close()
        for conn in list(self._connections):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                    await conn.closed_event.wait()
            if not conn.closed_event.is_set():
                conn.abort()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await self._server.wait_closed()
        await self._tasks.cancel_all()
        self._server = None
        log.info("remoting server stopped", name=self._name)
