"""AutoSwitch HA master: handshake with epochs, TRANSFER frames, acks (ha.md 3.4, 3.5, 3.7).

Owns: the ``haListenPort`` server in controller mode, one :class:`AutoSwitchConnection` per slave
(state follows the slave's last message; HANDSHAKE answered with the epoch history; TRANSFER
frames that never cross a segment or an epoch), the :class:`SyncStateTracker` and the confirm
offset. Must not: talk to the controller (``on_sync_state_set_changed`` is the broker's hook) or
change the epoch file (the service does on role changes). Mirrors ``AutoSwitchHAConnection`` and
the master half of ``AutoSwitchHAService`` (apache/rocketmq 5.1.1+).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog

from rocketpy.common.ack_waiters import AckWaiters, AckWaitersByCount, nth_highest
from rocketpy.common.aio import TaskSet
from rocketpy.common.clock import Clock
from rocketpy.common.errors import RocketPyError
from rocketpy.ha.autoswitch.sync_state import ExpandCheck, SyncStateTracker
from rocketpy.ha.classic.master import FlowMonitor
from rocketpy.ha.config import HAConfig
from rocketpy.ha.protocol import (
    HACodecError,
    HAConnectionState,
    Handshake,
    HandshakeResponse,
    SlaveMessageReader,
    TransferFrame,
    TransferReport,
    encode_handshake_response,
    encode_transfer_frame,
)
from rocketpy.store.epoch_cache import EpochFileCache
from rocketpy.store.epoch_entries import EpochEntry
from rocketpy.store.replication import ReplicationLog

log = structlog.get_logger(__name__)

READ_CHUNK = 64 * 1024
NO_EPOCH_RETRY_S = 0.5  # upstream retries every 500 ms when no epoch covers the start offset
ALL = 1 << 63  # a threshold above every offset: nothing to wait for


class HAProtocolError(RocketPyError):
    """The slave broke the protocol (no handshake, bogus ack): drop only its connection."""


class AutoSwitchConnection:
    """One slave connection on the master (``AutoSwitchHAConnection``)."""

    def __init__(
        self, master: AutoSwitchHAMaster, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._m = master
        self._reader = reader
        self._writer = writer
        peer = writer.get_extra_info("peername")
        self.address = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.state = HAConnectionState.HANDSHAKE
        self.slave_id = -1
        self.is_async_learner = False
        self.is_sync_from_last_file = False
        self.request_offset = -1
        self.ack_offset = 0
        self.next_transfer_from = -1
        self.last_master_max_offset = -1
        self.last_transfer_ms = 0
        self._handshake_wanted = False
        self._wake = asyncio.Event()
        self._flow = FlowMonitor(master.config, master.clock)

    def notify(self) -> None:
        """New data, or a message from the slave to answer."""
        self._wake.set()

    async def serve(self) -> None:
        """Run until the slave goes away, a deadline passes or the master stops."""
        try:
            async with asyncio.TaskGroup() as tg:
                read = tg.create_task(self._read_loop(), name=f"ha-read/{self.address}")
                write = tg.create_task(self._write_loop(), name=f"ha-write/{self.address}")
                read.add_done_callback(lambda _t: write.cancel())
                write.add_done_callback(lambda _t: read.cancel())
        except* (OSError, TimeoutError, HACodecError, HAProtocolError) as eg:
            log.warning("ha connection closed", slave=self.address, error=repr(eg.exceptions[0]))
        finally:
            self._writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(1):
                    await self._writer.wait_closed()

    async def _read_loop(self) -> None:
        reader = SlaveMessageReader()
        housekeeping_s = self._m.config.ha_housekeeping_interval_ms / 1000
        while True:
            try:
                async with asyncio.timeout(housekeeping_s):
                    data = await self._reader.read(READ_CHUNK)
            except TimeoutError:
                log.warning("ha housekeeping, found this connection expired", slave=self.address)
                return
            if not data:
                return
            for msg in reader.feed(data):
                if isinstance(msg, Handshake):
                    self._on_handshake(msg)
                else:
                    self._on_report(msg)

    def _on_handshake(self, msg: Handshake) -> None:
        self.state = HAConnectionState.HANDSHAKE
        self.slave_id = msg.slave_broker_id
        self.is_async_learner = msg.is_async_learner
        self.is_sync_from_last_file = msg.is_sync_from_last_file
        self._handshake_wanted = True
        log.info("receive slave handshake", slave=self.address, slave_id=self.slave_id)
        self.notify()

    def _on_report(self, msg: TransferReport) -> None:
        # Stricter than upstream (H-14): a report from a peer that never sent a HANDSHAKE, or
        # an ack of bytes this master does not hold, closes the connection before it counts.
        if self.slave_id < 0:
            raise HAProtocolError("State not matched, TRANSFER report before HANDSHAKE")
        top = self._m.store.max_phy_offset
        if msg.slave_max_offset > top:
            raise HAProtocolError(f"slave acked {msg.slave_max_offset} beyond master max {top}")
        self.state = HAConnectionState.TRANSFER
        self.ack_offset = msg.slave_max_offset
        if self.request_offset < 0:
            self.request_offset = msg.slave_max_offset
            log.info("slave request offset", slave_id=self.slave_id, offset=self.request_offset)
        self._m.on_report(self)
        self.notify()

    def _start_offset(self) -> int:
        store = self._m.store
        if self.request_offset != 0:
            return self.request_offset
        if self.is_sync_from_last_file:
            top = store.max_phy_offset
            return top - top % store.segment_size
        return store.min_phy_offset

    async def _write_loop(self) -> None:
        heartbeat_ms = self._m.config.ha_send_heartbeat_interval_ms
        clock = self._m.clock
        last_write = clock.monotonic_ms()
        while True:
            self._wake.clear()
            if self._handshake_wanted:
                self._handshake_wanted = False
                await self._send(encode_handshake_response(self._m.handshake_response()))
                last_write = clock.monotonic_ms()
                continue
            if self.state is HAConnectionState.TRANSFER and self.request_offset >= 0:
                if self.next_transfer_from < 0:
                    self.next_transfer_from = self._start_offset()
                sent = await self._transfer_some()
                if sent is None:
                    await asyncio.sleep(NO_EPOCH_RETRY_S)  # no epoch covers the offset yet
                if sent:
                    last_write = clock.monotonic_ms()
                    continue
                self._m.on_idle(self)
                idle = clock.monotonic_ms() - last_write
                if idle >= heartbeat_ms:
                    await self._send(encode_transfer_frame(self._heartbeat()))
                    last_write = clock.monotonic_ms()
                    continue
            else:
                idle = clock.monotonic_ms() - last_write
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(heartbeat_ms - idle, 1) / 1000):
                    await self._wake.wait()
            # One more loop turn: the other sends of the same burst append too, and go out in
            # this frame (one write and one slave ack for many messages).
            await asyncio.sleep(0)

    def _heartbeat(self) -> TransferFrame:
        entry = self._m.epochs.last_entry()
        return TransferFrame(
            offset=self.next_transfer_from,
            epoch=entry.epoch if entry else -1,
            epoch_start_offset=entry.start_offset if entry else 0,
            confirm_offset=self._m.confirm_offset,
        )

    async def _transfer_some(self) -> int | None:
        """Send one data frame; its size, 0 when idle, None when no epoch covers the offset."""
        entry = self._m.epochs.find_epoch_entry_by_offset(self.next_transfer_from)
        if entry is None:
            return None
        size = min(self._m.config.ha_transfer_batch_size_bytes, self._flow.allowance())
        # Never cross the epoch's end: the next frame carries the next epoch (ha.md 3.5).
        size = min(size, entry.end_offset - self.next_transfer_from)
        if size <= 0:
            return 0
        data = self._m.store.read_raw(self.next_transfer_from, size)
        if not data:
            return 0
        frame = TransferFrame(offset=self.next_transfer_from, epoch=entry.epoch,
                              epoch_start_offset=entry.start_offset,
                              confirm_offset=self._m.confirm_offset, body=data)  # fmt: skip
        self.last_master_max_offset = self._m.store.max_phy_offset
        self.last_transfer_ms = self._m.clock.monotonic_ms()
        await self._send(encode_transfer_frame(frame))
        self._flow.record(len(data))
        self.next_transfer_from += len(data)
        return len(data)

    async def _send(self, data: bytes) -> None:
        self._writer.write(data)
        async with asyncio.timeout(self._m.config.ha_housekeeping_interval_ms / 1000):
            await self._writer.drain()


class AutoSwitchHAMaster:
    """Serves AutoSwitch slaves and keeps the SyncStateSet of ``local_id``."""

    def __init__(
        self,
        store: ReplicationLog,
        epochs: EpochFileCache,
        config: HAConfig,
        *,
        local_id: int,
        clock: Clock,
        on_sync_state_set_changed: Callable[[frozenset[int]], None] = lambda s: None,
    ) -> None:
        self.store = store
        self.epochs = epochs
        self.config = config
        self.clock = clock
        self.sync_state = SyncStateTracker(local_id, config.ha_max_time_slave_not_catchup_ms)
        self.on_sync_state_set_changed = on_sync_state_set_changed
        self.connections: list[AutoSwitchConnection] = []
        self.confirm_offset = store.max_phy_offset
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks = TaskSet("ha-connection")
        # Sends waiting for every SyncStateSet member (allAckInSyncStateSet), and sends
        # waiting for N replicas, by N.
        self._all_waiters = AckWaiters()
        self._count_waiters = AckWaitersByCount()
        self._reput_wake_pending = False
        store.add_append_listener(self._on_append)

    async def start(self, host: str = "0.0.0.0", port: int | None = None) -> None:
        """Listen (``haListenPort`` unless ``port`` is given; 0 picks a free port)."""
        listen = self.config.ha_listen_port if port is None else port
        self._server = await asyncio.start_server(self._on_connect, host, listen)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("AutoSwitchHAService listening", host=host, port=self.port)

    async def stop(self) -> None:
        """Close the listener and every connection. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        await self.close_connections()
        if server is not None:
            await server.wait_closed()

    async def close_connections(self) -> None:
        """Drop every slave connection (role change)."""
        await self._tasks.cancel_all()

    def fail_waiters(self) -> None:
        """Answer every send waiting for acks False (FLUSH_SLAVE_TIMEOUT): this broker is no
        longer master, so what it wrote after the new master's start may be cut."""
        self._all_waiters.fail_all()
        self._count_waiters.fail_all()

    def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = AutoSwitchConnection(self, reader, writer)
        self.connections.append(conn)
        self._tasks.spawn(self._serve(conn), name=f"ha-connection/{conn.address}")

    async def _serve(self, conn: AutoSwitchConnection) -> None:
        try:
            await conn.serve()
        finally:
            self.connections.remove(conn)
            if conn.slave_id >= 0 and not any(
                c.slave_id == conn.slave_id for c in self.connections
            ):
                self._report(self.sync_state.remove(conn.slave_id))
            self._recompute_confirm()

    def _on_append(self) -> None:
        for conn in self.connections:
            conn.notify()
        if len(self.sync_state.effective()) <= 1:
            self._recompute_confirm()

    def handshake_response(self) -> HandshakeResponse:
        """Max offset and epoch history for a HANDSHAKE answer."""
        return HandshakeResponse(master_max_offset=self.store.max_phy_offset,
                                 last_epoch=self.epochs.last_epoch(),
                                 entries=self.epochs.entries())  # fmt: skip

    def _report(self, proposed: frozenset[int] | None) -> None:
        if proposed is not None:
            log.info("sync state set changed, report to controller", members=sorted(proposed))
            self.on_sync_state_set_changed(proposed)
            self._recompute_confirm()

    def on_report(self, conn: AutoSwitchConnection) -> None:
        """A TRANSFER report: caught-up time, expand, confirm offset, waiters."""
        now = self.clock.monotonic_ms()
        if conn.ack_offset >= self.store.max_phy_offset:
            self.sync_state.update_caught_up(conn.slave_id, now)
        elif conn.ack_offset >= conn.last_master_max_offset:
            self.sync_state.update_caught_up(conn.slave_id, conn.last_transfer_ms)
        last: EpochEntry | None = self.epochs.last_entry()
        self._report(self.sync_state.maybe_expand(ExpandCheck(
            slave_id=conn.slave_id, slave_max_offset=conn.ack_offset,
            is_async_learner=conn.is_async_learner,
            last_master_max_offset=conn.last_master_max_offset,
            confirm_offset=self.confirm_offset,
            current_epoch_start=last.start_offset if last else 0,
        )))  # fmt: skip
        self._recompute_confirm()

    def on_idle(self, conn: AutoSwitchConnection) -> None:
        """Nothing left to send to ``conn``: it is caught up if it acked everything."""
        if conn.ack_offset >= self.store.max_phy_offset:
            self.sync_state.update_caught_up(conn.slave_id, self.clock.monotonic_ms())

    def acks(self) -> dict[int, int]:
        """Ack offset of every connected slave, by broker id (the highest per id)."""
        out: dict[int, int] = {}
        for c in self.connections:
            if c.slave_id >= 0 and c.state is HAConnectionState.TRANSFER:
                out[c.slave_id] = max(out.get(c.slave_id, 0), c.ack_offset)
        return out

    def recheck_waiters(self) -> None:
        """The SyncStateSet changed: release the waits it now satisfies, recompute the confirm
        offset."""
        self._recompute_confirm()

    def _recompute_confirm(self) -> None:
        max_offset = self.store.max_phy_offset
        if not self.config.all_ack_in_sync_state_set or len(self.sync_state.effective()) <= 1:
            new = max_offset
        else:
            new = self.sync_state.compute_confirm_offset(max_offset, self.acks(),
                                                         self.confirm_offset)  # fmt: skip
        if self._all_waiters or self._count_waiters:
            acks = self.acks()
            if self._all_waiters:
                self._all_waiters.release(self._all_acked_offset(acks))
            self._count_waiters.release(lambda needed: self._acked_by_offset(acks, needed))
        if new != self.confirm_offset:
            self.confirm_offset = new
            # Dispatch after the released sends wrote their answers: a reput wake scheduled
            # now would run its whole pass (tens of records) before those answers go out.
            if not self._reput_wake_pending:
                self._reput_wake_pending = True
                asyncio.get_running_loop().call_soon(self._wake_reput)

    def _wake_reput(self) -> None:
        self._reput_wake_pending = False
        self.store.wake_dispatch()

    def shrink(self) -> None:
        """``maybeShrinkSyncStateSet`` (every ``checkSyncStateSetPeriod``)."""
        connected = frozenset(c.slave_id for c in self.connections if c.slave_id >= 0)
        self._report(self.sync_state.maybe_shrink(self.clock.monotonic_ms(), connected))

    def _all_acked_offset(self, acks: dict[int, int]) -> int:
        """Highest offset every SyncStateSet member other than the master acked."""
        members = self.sync_state.effective() - {self.sync_state.local_id}
        return min((acks.get(m, -1) for m in members), default=ALL)

    @staticmethod
    def _acked_by_offset(acks: dict[int, int], needed: int) -> int:
        """Highest offset ``needed`` replicas (the master counts as one) hold."""
        slaves = needed - 1
        if slaves <= 0:
            return ALL
        return nth_highest(acks.values(), slaves)

    def all_acked(self, offset: int) -> bool:
        """Every SyncStateSet member other than the master acked ``offset``."""
        return self._all_acked_offset(self.acks()) >= offset

    def acked_count(self, offset: int) -> int:
        """Replicas holding ``offset`` (the master counts as one)."""
        return 1 + sum(1 for ack in self.acks().values() if ack >= offset)

    async def wait_for_all_acks(self, offset: int, timeout_s: float) -> bool:
        """``allAckInSyncStateSet``: wait until :meth:`all_acked`; False on timeout."""
        if self.all_acked(offset):
            return True
        return await self._all_waiters.wait(offset, timeout_s)

    async def wait_for_acks(self, offset: int, timeout_s: float, needed: int) -> bool:
        """Wait until ``needed`` replicas (master included) hold ``offset``; False on timeout."""
        if self.acked_count(offset) >= needed:
            return True
        return await self._count_waiters.wait(needed, offset, timeout_s)
