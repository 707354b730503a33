"""Classic HA master: accepts slaves, pushes CommitLog bytes, tracks acks (ha.md section 2).

Owns: the ``haListenPort`` server, one :class:`SlaveConnection` per slave (a read task for its
8-byte reports and a write task pushing 12-byte-header frames), ``push2SlaveMaxOffset`` and the
SYNC_MASTER waiters. Must not: append to the store or decide send statuses (the broker maps a
failed :meth:`ClassicHAMaster.wait_for_ack` to ``FLUSH_SLAVE_TIMEOUT``). Mirrors
``DefaultHAService`` (``AcceptSocketService``, ``GroupTransferService``), ``DefaultHAConnection``
and ``FlowMonitor`` of apache/rocketmq 5.x.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import structlog

from rocketpy.common.ack_waiters import AckWaitersByCount, nth_highest
from rocketpy.common.aio import TaskSet
from rocketpy.common.clock import Clock, SystemClock
from rocketpy.ha.config import HAConfig
from rocketpy.ha.protocol import HACodecError, OffsetReportReader, encode_classic_frame
from rocketpy.store.replication import ReplicationLog

log = structlog.get_logger(__name__)

READ_CHUNK = 64 * 1024


class FlowMonitor:
    """Bytes per one-second window for one slave (``FlowMonitor``); unlimited when disabled."""

    def __init__(self, config: HAConfig, clock: Clock) -> None:
        self._enabled = config.ha_flow_control_enable
        self._limit = config.max_ha_transfer_byte_in_second
        self._clock = clock
        self._window = clock.monotonic_ms() // 1000
        self._sent = 0

    def allowance(self) -> int:
        """Bytes that may be sent now (a large number when disabled)."""
        if not self._enabled:
            return 1 << 62
        window = self._clock.monotonic_ms() // 1000
        if window != self._window:
            self._window, self._sent = window, 0
        return max(self._limit - self._sent, 0)

    def record(self, count: int) -> None:
        """Count ``count`` bytes as sent in the current window."""
        self._sent += count

    def seconds_to_next_window(self) -> float:
        """Time until the allowance resets."""
        return max(1.0 - (self._clock.monotonic_ms() % 1000) / 1000, 0.001)


@dataclass(frozen=True, slots=True, kw_only=True)
class SlaveStatistics:
    """One slave connection as the master sees it."""

    address: str
    request_offset: int
    ack_offset: int
    next_transfer_from: int


class SlaveConnection:
    """One slave: reader of reports and writer of frames (``DefaultHAConnection``)."""

    def __init__(
        self,
        master: ClassicHAMaster,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self._master = master
        self._reader = reader
        self._writer = writer
        peer = writer.get_extra_info("peername")
        self.address = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.request_offset = -1  # first report on this connection; -1 until it arrives
        self.ack_offset = 0
        self.next_transfer_from = -1
        self._first_report = asyncio.Event()
        self._new_data = asyncio.Event()
        self._flow = FlowMonitor(master.config, master.clock)

    def notify_new_data(self) -> None:
        """The master appended bytes."""
        self._new_data.set()

    def statistics(self) -> SlaveStatistics:
        """Offsets of this connection."""
        return SlaveStatistics(address=self.address, request_offset=self.request_offset,
                               ack_offset=self.ack_offset,
                               next_transfer_from=self.next_transfer_from)  # fmt: skip

    async def serve(self) -> None:
        """Run until the slave goes away, a deadline passes or the master stops."""
        log.info("HAService receive new connection", slave=self.address)
        try:
            async with asyncio.TaskGroup() as tg:
                read = tg.create_task(self._read_loop(), name=f"ha-read/{self.address}")
                write = tg.create_task(self._write_loop(), name=f"ha-write/{self.address}")
                read.add_done_callback(lambda _t: write.cancel())
                write.add_done_callback(lambda _t: read.cancel())
        except* (OSError, TimeoutError, HACodecError) as eg:
            log.warning("ha connection closed", slave=self.address, error=repr(eg.exceptions[0]))
        finally:
            self._writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(1):
                    await self._writer.wait_closed()
            log.info("ha connection removed", slave=self.address)

    async def _read_loop(self) -> None:
        reports = OffsetReportReader()
        housekeeping_s = self._master.config.ha_housekeeping_interval_ms / 1000
        while True:
            try:
                async with asyncio.timeout(housekeeping_s):
                    data = await self._reader.read(READ_CHUNK)
            except TimeoutError:
                log.warning("ha housekeeping, found this connection expired", slave=self.address)
                return
            if not data:
                log.info("slave closed the HA connection", slave=self.address)
                return
            value = reports.feed(data)
            if value is None:
                continue
            if self.request_offset < 0:
                self.request_offset = value
                self._first_report.set()
                log.info("slave request offset", slave=self.address, offset=value)
            self.ack_offset = value
            self._master.on_ack(value)

    def _start_offset(self) -> int:
        if self.request_offset != 0:
            return self.request_offset
        # An empty slave starts at the beginning of the master's last segment (ha.md 2.2).
        max_offset = self._master.store.max_phy_offset
        return max_offset - max_offset % self._master.store.segment_size

    async def _write_loop(self) -> None:
        await self._first_report.wait()
        config = self._master.config
        heartbeat_ms = config.ha_send_heartbeat_interval_ms
        clock = self._master.clock
        self.next_transfer_from = self._start_offset()
        log.info("master transfer data from", slave=self.address, offset=self.next_transfer_from)
        last_write = clock.monotonic_ms()
        while True:
            self._new_data.clear()
            allowance = self._flow.allowance()
            if allowance <= 0:
                await asyncio.sleep(self._flow.seconds_to_next_window())  # rate limit, not a wait
                continue
            size = min(config.ha_transfer_batch_size_bytes, allowance)
            data = self._master.store.read_raw(self.next_transfer_from, size)
            if data:
                await self._send(encode_classic_frame(self.next_transfer_from, data))
                self._flow.record(len(data))
                self.next_transfer_from += len(data)
                last_write = clock.monotonic_ms()
                continue
            idle_ms = clock.monotonic_ms() - last_write
            if idle_ms >= heartbeat_ms:
                await self._send(encode_classic_frame(self.next_transfer_from))
                last_write = clock.monotonic_ms()
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout((heartbeat_ms - idle_ms) / 1000):
                    await self._new_data.wait()
            # One more loop turn: the other sends of the same burst append too, and go out in
            # this frame (one write and one slave report for many messages).
            await asyncio.sleep(0)

    async def _send(self, frame: bytes) -> None:
        self._writer.write(frame)
        async with asyncio.timeout(self._master.config.ha_housekeeping_interval_ms / 1000):
            await self._writer.drain()


class ClassicHAMaster:
    """The master side of ``DefaultHAService``: listen, push, count acks."""

    def __init__(
        self, store: ReplicationLog, config: HAConfig, *, clock: Clock | None = None
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock or SystemClock()
        self.connections: list[SlaveConnection] = []
        self.push_to_slave_max_offset = 0  # push2SlaveMaxOffset: max ack over all connections
        self._server: asyncio.Server | None = None
        self._tasks = TaskSet("ha-connection")
        self._waiters = AckWaitersByCount()  # SYNC_MASTER sends, by replicas needed
        self.port = 0
        store.add_append_listener(self._on_append)

    async def start(self, host: str = "0.0.0.0", port: int | None = None) -> None:
        """Listen on ``host:port`` (default ``haListenPort``; 0 picks a free port)."""
        listen = self.config.ha_listen_port if port is None else port
        self._server = await asyncio.start_server(self._on_connect, host, listen)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("HAService listening", host=host, port=self.port)

    async def stop(self) -> None:
        """Close the listener and every connection; fail pending waits. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        await self._tasks.cancel_all()
        if server is not None:
            await server.wait_closed()
        self._waiters.cancel_all()

    def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = SlaveConnection(self, reader, writer)
        self.connections.append(conn)
        self._tasks.spawn(self._serve(conn), name=f"ha-connection/{conn.address}")

    async def _serve(self, conn: SlaveConnection) -> None:
        try:
            await conn.serve()
        finally:
            self.connections.remove(conn)

    def _on_append(self) -> None:
        for conn in self.connections:
            conn.notify_new_data()

    # -- acks (GroupTransferService) ------------------------------------------------------------

    def on_ack(self, offset: int) -> None:
        """A slave acknowledged ``offset``; release the waits it satisfies."""
        self.push_to_slave_max_offset = max(self.push_to_slave_max_offset, offset)
        self._waiters.release(self._acked_offset)

    def _acked_offset(self, needed: int) -> int:
        """Highest offset :meth:`is_acked` holds for with ``needed``."""
        if needed <= 1:
            return self.push_to_slave_max_offset
        return nth_highest((c.ack_offset for c in self.connections), needed - 1)

    def is_acked(self, offset: int, needed: int) -> bool:
        """Whether ``needed`` replicas (the master counts as one) hold bytes below ``offset``.

        ``needed <= 1`` means "any slave": ``push2SlaveMaxOffset >= offset``, as upstream's
        ``GroupTransferService.doWaitTransfer`` does for ``ackNums <= 1``.
        """
        return self._acked_offset(needed) >= offset

    async def wait_for_ack(self, offset: int, timeout_s: float, needed: int) -> bool:
        """Wait until :meth:`is_acked` holds for ``offset`` (SYNC_MASTER group transfer).

        Args:
            offset: the end of the message (``wroteOffset + wroteBytes``).
            timeout_s: ``slaveTimeout`` in seconds.
            needed: replicas that must have it, the master included (``inSyncReplicas``).

        Returns:
            True once acknowledged; False when the deadline passed first.
        """
        if self.is_acked(offset, needed):
            return True
        return await self._waiters.wait(needed, offset, timeout_s)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """4.9 ``isSlaveOK``: a slave is connected and not ``haMaxGapNotInSync`` behind."""
        gap = master_put_where - self.push_to_slave_max_offset
        return bool(self.connections) and gap < self.config.ha_max_gap_not_in_sync_bytes

    def statistics(self) -> list[SlaveStatistics]:
        """Every connected slave."""
        return [c.statistics() for c in self.connections]
