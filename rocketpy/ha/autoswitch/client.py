"""AutoSwitch HA slave: READY -> HANDSHAKE -> TRANSFER with truncation (ha.md 3.1-3.6).

Owns: the connection to the master, the handshake (5.1.1 layout: flags and brokerId), the
truncation to the consistent point, epoch entries appended as TRANSFER frames bring new epochs,
the replicated confirm offset, and reconnecting. Must not: decide roles (the service does).
Mirrors ``AutoSwitchHAClient`` of apache/rocketmq 5.1.1+.

Decided: the slave reports its max offset right after the handshake/truncation step even when
it has not grown (upstream waits for the periodic report, up to ``haSendHeartbeatInterval``);
a report is harmless to any master and avoids a 5 s stall per (re)connect.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from rocketpy.common.clock import Clock
from rocketpy.common.errors import StoreError
from rocketpy.ha.autoswitch.truncate import truncate_invalid_tail, truncate_to_master
from rocketpy.ha.config import HAConfig
from rocketpy.ha.protocol import (
    HACodecError,
    HAConnectionState,
    Handshake,
    HandshakeResponse,
    MasterMessageReader,
    TransferFrame,
    encode_handshake,
    encode_transfer_report,
)
from rocketpy.store.epoch_cache import EpochFileCache
from rocketpy.store.epoch_entries import EpochEntry
from rocketpy.store.replication import ReplicationLog

log = structlog.get_logger(__name__)

READ_CHUNK = 256 * 1024


class ReplicationRefused(Exception):
    """The master's stream cannot be followed (state mismatch, offset gap, no common epoch)."""


class AutoSwitchHAClient:
    """Replicates from one master as broker ``broker_id``."""

    def __init__(
        self,
        store: ReplicationLog,
        epochs: EpochFileCache,
        config: HAConfig,
        *,
        broker_id: int,
        clock: Clock,
    ) -> None:
        self.store = store
        self.epochs = epochs
        self.config = config
        self.broker_id = broker_id
        self.clock = clock
        self.state = HAConnectionState.READY
        self.master_address: str | None = None
        self.confirm_offset = -1
        self.reported_offset = 0
        self.connects = 0
        self.refusals = 0  # handshakes with no consistent point
        self._address_changed = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    def update_ha_master_address(self, address: str | None) -> None:
        """Follow ``address``; a different one drops the current connection."""
        if address == self.master_address:
            return
        self.master_address = address
        self._address_changed.set()
        if self._writer is not None:
            self._writer.close()

    def start(self) -> None:
        """Start the replication task."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-client")

    async def stop(self) -> None:
        """Close the connection and stop. Idempotent."""
        if self._writer is not None:
            self._writer.close()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.state = HAConnectionState.SHUTDOWN

    async def _run(self) -> None:
        while True:
            self.state = HAConnectionState.READY
            address = self.master_address
            self._address_changed.clear()
            if address is not None:
                try:
                    await truncate_invalid_tail(self.store, self.epochs)
                    await self._session(address)
                except (OSError, TimeoutError, HACodecError, StoreError, ReplicationRefused) as e:
                    log.warning("AutoSwitchHAClient connection failed", master=address,
                                error=repr(e))  # fmt: skip
            timeout_s = self.config.ha_reconnect_interval_ms / 1000 if address else None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._address_changed.wait()

    async def _session(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        async with asyncio.timeout(self.config.ha_housekeeping_interval_ms / 1000):
            reader, writer = await asyncio.open_connection(host, int(port))
        self._writer = writer
        self.connects += 1
        try:
            self.state = HAConnectionState.HANDSHAKE
            hs = Handshake(is_sync_from_last_file=self.config.sync_from_last_file,
                           is_async_learner=self.config.async_learner,
                           slave_broker_id=self.broker_id)  # fmt: skip
            await self._write(writer, encode_handshake(hs))
            await self._loop(reader, writer)
        finally:
            self._writer = None
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(1):
                    await writer.wait_closed()

    async def _write(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        async with asyncio.timeout(self.config.ha_housekeeping_interval_ms / 1000):
            await writer.drain()

    async def _report(self, writer: asyncio.StreamWriter, offset: int) -> None:
        await self._write(writer, encode_transfer_report(offset))
        self.reported_offset = offset

    async def _loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heartbeat_ms = self.config.ha_send_heartbeat_interval_ms
        messages = MasterMessageReader()
        last_read = last_report = self.clock.monotonic_ms()
        while True:
            data: bytes | None = None
            wait_ms = max(last_report + heartbeat_ms - self.clock.monotonic_ms(), 0)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_ms / 1000):
                    data = await reader.read(READ_CHUNK)
            now = self.clock.monotonic_ms()
            if data is None:
                if now - last_read > self.config.ha_housekeeping_interval_ms:
                    raise TimeoutError("AutoSwitchHAClient, housekeeping, connection expired")
                if self.state is HAConnectionState.TRANSFER:
                    await self._report(writer, self.reported_offset)
                last_report = now
                continue
            if not data:
                raise ConnectionResetError("master closed the HA connection")
            last_read = now
            for msg in messages.feed(data):
                if isinstance(msg, HandshakeResponse):
                    await self._on_handshake(msg)
                    await self._report(writer, self.store.max_phy_offset)
                    last_report = self.clock.monotonic_ms()
                else:
                    await self._on_transfer(msg)
            top = self.store.max_phy_offset
            if self.state is HAConnectionState.TRANSFER and top > self.reported_offset:
                await self._report(writer, top)
                last_report = self.clock.monotonic_ms()

    async def _on_handshake(self, msg: HandshakeResponse) -> None:
        if self.state is not HAConnectionState.HANDSHAKE:
            raise ReplicationRefused(f"State not matched, {self.state.name} got HANDSHAKE")
        if not await truncate_to_master(self.store, self.epochs, msg):
            self.refusals += 1
            await asyncio.sleep(2)  # upstream waits 2 s before dropping the connection
            raise ReplicationRefused("no consistent point with the master's epochs")
        self.state = HAConnectionState.TRANSFER

    async def _on_transfer(self, frame: TransferFrame) -> None:
        if self.state is not HAConnectionState.TRANSFER:
            raise ReplicationRefused(f"State not matched, {self.state.name} got TRANSFER")
        top = self.store.max_phy_offset
        if top not in (0, frame.offset):
            raise ReplicationRefused(f"master pushed offset {frame.offset} != slave max {top}")
        if frame.body:
            if frame.epoch != self.epochs.last_epoch():
                entry = EpochEntry(epoch=frame.epoch, start_offset=frame.epoch_start_offset)
                # Stricter than upstream, which ignores the refusal and appends the bytes
                # anyway: data of an epoch older than ours cannot follow our history.
                if not await self.epochs.append_entry(entry):
                    raise ReplicationRefused(f"epoch {frame.epoch} not after ours")
            await self.store.append_replicated(frame.offset, frame.body)
        self.confirm_offset = min(frame.confirm_offset, self.store.max_phy_offset)
        self.store.wake_dispatch()
