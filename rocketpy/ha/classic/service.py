"""``DefaultHAService``: the classic HA of one broker, master and slave halves together.

Owns: the :class:`ClassicHAMaster` (every broker listens on ``haListenPort``, as upstream's
``AcceptSocketService`` runs whatever the role) and the :class:`ClassicHAClient` (connects only
once it has a master HA address), and the SYNC_MASTER decision of ``CommitLog.handleHA`` (ha.md
section 2.4, 5.x). Must not: map results to response codes (the broker does). Mirrors
``DefaultHAService`` and the HA part of ``CommitLog.asyncPutMessage`` of apache/rocketmq 5.x.
"""

from __future__ import annotations

from rocketpy.common.clock import Clock, SystemClock
from rocketpy.ha.classic.master import ClassicHAMaster, SlaveStatistics
from rocketpy.ha.classic.slave import ClassicHAClient, ClientStatistics
from rocketpy.ha.config import HAConfig
from rocketpy.ha.state import ReplicaStatus
from rocketpy.store.replication import ReplicationLog


class DefaultHAService:
    """Classic replication of one broker's CommitLog."""

    def __init__(
        self,
        store: ReplicationLog,
        config: HAConfig,
        *,
        sync_master: bool,
        auto_in_sync_replicas: bool = False,
        clock: Clock | None = None,
    ) -> None:
        """Build both halves; nothing is bound until :meth:`start`.

        Args:
            store: this broker's store, seen through its replication interface (HA's only
                access to it).
            config: HA settings (``haListenPort`` already resolved).
            sync_master: ``brokerRole=SYNC_MASTER``: sends wait for replicas.
            auto_in_sync_replicas: ``enableSlaveActingMaster``: lower the replicas a send needs
                to those in sync (not below ``minInSyncReplicas``, with
                ``enableAutoInSyncReplicas``).
            clock: time source.
        """
        self.config = config
        self.sync_master = sync_master
        self._auto = auto_in_sync_replicas
        clock = clock or SystemClock()
        self.master = ClassicHAMaster(store, config, clock=clock)
        self.client = ClassicHAClient(store, config, clock=clock)
        self._store = store

    @property
    def port(self) -> int:
        """The bound HA port (valid after :meth:`start`)."""
        return self.master.port

    async def start(self, host: str = "0.0.0.0") -> None:
        """Listen on ``host:haListenPort`` and start the client task."""
        await self.master.start(host)
        self.client.start()

    async def stop(self) -> None:
        """Stop the client, then the listener and its connections. Idempotent."""
        await self.client.stop()
        await self.master.stop()

    def update_ha_master_address(self, address: str | None) -> None:
        """The master's HA address (``haMasterAddress`` or the NameServer's ``haServerAddr``)."""
        self.client.update_ha_master_address(address)

    def in_sync_replicas_nums(self, master_put_where: int) -> int:
        """``inSyncReplicasNums``: 1 + slaves less than ``haMaxGapNotInSync`` behind."""
        gap = self.config.ha_max_gap_not_in_sync_bytes
        return 1 + sum(1 for c in self.master.connections if master_put_where - c.ack_offset < gap)

    def need_ack_nums(self, end_offset: int) -> tuple[int, bool]:
        """Replicas a send must reach (master included) and whether enough are in sync."""
        need = self.config.in_sync_replicas
        if not self._auto:
            return need, True
        in_sync = self.in_sync_replicas_nums(end_offset)
        if self.config.enable_auto_in_sync_replicas:
            need = max(min(need, in_sync), self.config.min_in_sync_replicas)
        return need, need <= in_sync

    def can_accept(self, current_offset: int) -> bool:
        """False when acting-master mode lacks in-sync replicas: refuse before appending
        (``IN_SYNC_REPLICAS_NOT_ENOUGH``, nothing stored)."""
        return not self.sync_master or self.need_ack_nums(current_offset)[1]

    def waits_for_replicas(self, *, wait_store: bool) -> bool:
        """Whether :meth:`handle_ha` could wait for a send: False lets the broker answer it
        without awaiting (an ASYNC_MASTER never waits; nor does ``WAIT=false``, nor a
        fixed ``inSyncReplicas`` of 1)."""
        if not self.sync_master or not wait_store:
            return False
        return self._auto or self.config.in_sync_replicas > 1

    async def handle_ha(self, end_offset: int, *, wait_store: bool) -> ReplicaStatus:
        """``CommitLog.handleHA`` for a message ending at ``end_offset`` that is already stored.

        5.x: only a SYNC_MASTER with ``WAIT=true`` and ``inSyncReplicas >= 2`` waits, for
        ``inSyncReplicas - 1`` slave acks, up to ``slaveTimeout``; 5.x never answers
        SLAVE_NOT_AVAILABLE (ha.md section 2.4).

        Returns:
            PUT_OK or FLUSH_SLAVE_TIMEOUT.
        """
        if not self.sync_master or not wait_store:
            return ReplicaStatus.PUT_OK
        need, _ = self.need_ack_nums(end_offset)
        if need <= 1:
            return ReplicaStatus.PUT_OK
        timeout_s = self.config.slave_timeout_ms / 1000
        if await self.master.wait_for_ack(end_offset, timeout_s, need):
            return ReplicaStatus.PUT_OK
        return ReplicaStatus.FLUSH_SLAVE_TIMEOUT

    def slaves(self) -> list[SlaveStatistics]:
        """The connected slaves (master side)."""
        return self.master.statistics()

    def client_statistics(self) -> ClientStatistics:
        """The slave side's connection state."""
        return self.client.statistics()
