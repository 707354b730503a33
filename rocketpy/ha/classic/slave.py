"""Classic HA slave: connects to the master, appends its bytes, reports offsets (ha.md 2).

Owns: the one connection to the master's HA address, the 8-byte reports (on connect, after each
appended frame that grew the log, every ``haSendHeartbeatInterval``), the offset check of every
frame and the reconnect loop. Must not: build consume queues (the store's reput does, from the
appended bytes) or learn the master address itself (the broker calls
:meth:`ClassicHAClient.update_ha_master_address` from config or the NameServer reply). Mirrors
``DefaultHAClient`` of apache/rocketmq 5.x.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import structlog

from rocketpy.common.clock import Clock, SystemClock
from rocketpy.common.errors import StoreError
from rocketpy.ha.config import HAConfig
from rocketpy.ha.protocol import ClassicFrameReader, HACodecError, encode_offset_report
from rocketpy.store.replication import ReplicationLog

log = structlog.get_logger(__name__)

READ_CHUNK = 256 * 1024


class OffsetMismatch(Exception):
    """The master pushed data at an offset that is not this slave's max offset."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientStatistics:
    """The slave's view of replication."""

    master_address: str | None
    connected: bool
    reported_offset: int
    connects: int


class ClassicHAClient:
    """``DefaultHAClient``: one task that connects, replicates and reconnects."""

    def __init__(
        self, store: ReplicationLog, config: HAConfig, *, clock: Clock | None = None
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock or SystemClock()
        self._master_address: str | None = config.valid_master_address
        self._address_changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.reported_offset = 0
        self.connects = 0

    @property
    def ha_master_address(self) -> str | None:
        """``host:port`` of the master's HA server, if known."""
        return self._master_address

    def update_ha_master_address(self, address: str | None) -> None:
        """Use ``address`` from now on; a different one drops the current connection."""
        if address == self._master_address:
            return
        log.info("update master ha address", old=self._master_address, new=address)
        self._master_address = address
        self._address_changed.set()
        if self._writer is not None:
            self._writer.close()

    @property
    def connected(self) -> bool:
        """Whether a connection to the master is open."""
        return self._writer is not None

    def statistics(self) -> ClientStatistics:
        """Address, connection state and the last reported offset."""
        return ClientStatistics(master_address=self._master_address, connected=self.connected,
                                reported_offset=self.reported_offset,
                                connects=self.connects)  # fmt: skip

    def start(self) -> None:
        """Start the replication task (it waits for an address if none is known)."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-client")

    async def stop(self) -> None:
        """Close the connection and stop the task. Idempotent."""
        if self._writer is not None:
            self._writer.close()
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            address = self._master_address
            self._address_changed.clear()
            if address is not None:
                try:
                    await self._session(address)
                except (OSError, TimeoutError, HACodecError, StoreError, OffsetMismatch) as e:
                    log.warning("HAClient connection failed", master=address, error=repr(e))
            # Reconnect after the interval, or at once when the address changes; with no
            # address, only a new address wakes the loop.
            timeout_s = self.config.ha_reconnect_interval_ms / 1000 if address else None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._address_changed.wait()

    async def _session(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        housekeeping_ms = self.config.ha_housekeeping_interval_ms
        async with asyncio.timeout(housekeeping_ms / 1000):
            reader, writer = await asyncio.open_connection(host, int(port))
        self._writer = writer
        self.connects += 1
        log.info("HAClient connect to master", master=address)
        try:
            await self._replicate(reader, writer)
        finally:
            self._writer = None
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(1):
                    await writer.wait_closed()

    async def _report(self, writer: asyncio.StreamWriter, offset: int) -> None:
        writer.write(encode_offset_report(offset))
        async with asyncio.timeout(self.config.ha_housekeeping_interval_ms / 1000):
            await writer.drain()
        self.reported_offset = offset

    async def _replicate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heartbeat_ms = self.config.ha_send_heartbeat_interval_ms
        housekeeping_ms = self.config.ha_housekeeping_interval_ms
        frames = ClassicFrameReader()
        await self._report(writer, self.store.max_phy_offset)
        last_read = last_report = self.clock.monotonic_ms()
        while True:
            wait_ms = max(last_report + heartbeat_ms - self.clock.monotonic_ms(), 0)
            data: bytes | None = None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_ms / 1000):
                    data = await reader.read(READ_CHUNK)
            now = self.clock.monotonic_ms()
            if data is None:
                if now - last_read > housekeeping_ms:
                    raise TimeoutError("HAClient, housekeeping, found this connection expired")
                await self._report(writer, self.reported_offset)
                last_report = now
                continue
            if not data:
                raise ConnectionResetError("master closed the HA connection")
            last_read = now
            for frame in frames.feed(data):
                await self._apply(frame.offset, frame.body)
            max_offset = self.store.max_phy_offset
            if max_offset > self.reported_offset:
                await self._report(writer, max_offset)
                last_report = self.clock.monotonic_ms()

    async def _apply(self, offset: int, body: bytes) -> None:
        slave_max = self.store.max_phy_offset
        if slave_max not in (0, offset):
            raise OffsetMismatch(
                f"master pushed offset not equal the max phy offset in slave, "
                f"SLAVE: {slave_max} MASTER: {offset}"
            )
        if body:
            await self.store.append_replicated(offset, body)
