"""``AutoSwitchHAService``: controller-mode replication of one broker, driven by role setters.

Owns: the always-on listener (:class:`AutoSwitchHAMaster`), the slave client while a slave, the
epoch history on role changes (ha.md section 3.9), the confirm offset that bounds the store's
dispatch, and the ``allAckInSyncStateSet`` wait of the send path (section 3.8). Must not: talk
to the controller or the NameServer: the controller-mode broker calls the setters below when a
role change arrives, reports ``on_sync_state_set_changed`` sets with ALTER_SYNC_STATE_SET and
feeds the answer back through :meth:`AutoSwitchHAService.set_sync_state_set`. Mirrors
``AutoSwitchHAService`` of apache/rocketmq 5.1.1+.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from rocketpy.common.aio import wait_until
from rocketpy.common.clock import Clock, SystemClock
from rocketpy.ha.autoswitch.client import AutoSwitchHAClient
from rocketpy.ha.autoswitch.master import AutoSwitchHAMaster
from rocketpy.ha.autoswitch.truncate import truncate_invalid_tail
from rocketpy.ha.config import HAConfig
from rocketpy.ha.state import ReplicaStatus
from rocketpy.store.epoch_cache import EpochFileCache
from rocketpy.store.epoch_entries import EpochEntry
from rocketpy.store.replication import ReplicationLog

log = structlog.get_logger(__name__)

DISPATCH_CATCH_UP_S = 30.0


class AutoSwitchHAService:
    """Replication in controller mode; starts with no role until a setter is called."""

    def __init__(
        self,
        store: ReplicationLog,
        epochs: EpochFileCache,
        config: HAConfig,
        *,
        local_broker_id: int,
        clock: Clock | None = None,
        on_sync_state_set_changed: Callable[[frozenset[int]], None] = lambda s: None,
    ) -> None:
        """Build the service; the store must be started before :meth:`start`.

        Args:
            store: this broker's store, seen through its replication interface (HA's only
                access to it).
            epochs: its epoch file (``<storePathRootDir>/epochFileCheckpoint``).
            config: HA settings.
            local_broker_id: this broker's controller-assigned id (a SyncStateSet member id).
            clock: time source.
            on_sync_state_set_changed: called with each new set the master proposes; the
                broker reports it to the controller (CONTROLLER_ALTER_SYNC_STATE_SET).
        """
        self.store = store
        self.epochs = epochs
        self.config = config
        self.local_broker_id = local_broker_id
        self.clock = clock or SystemClock()
        self.master = AutoSwitchHAMaster(
            store, epochs, config, local_id=local_broker_id, clock=self.clock,
            on_sync_state_set_changed=on_sync_state_set_changed,
        )  # fmt: skip
        self.client: AutoSwitchHAClient | None = None
        self.is_master = False
        self.epoch = epochs.last_epoch()
        store.set_confirm_offset_provider(self.confirm_offset)

    @property
    def port(self) -> int:
        """The bound HA port (after :meth:`start`)."""
        return self.master.port

    async def start(self, host: str = "0.0.0.0", port: int | None = None) -> None:
        """Listen for slaves (any role may be asked to serve after a role change)."""
        await self.master.start(host, port)

    async def stop(self) -> None:
        """Stop the client and the listener. Idempotent."""
        if self.client is not None:
            await self.client.stop()
            self.client = None
        await self.master.stop()

    def set_local_broker_id(self, broker_id: int) -> None:
        """This broker's controller-assigned id, once obtained (before the first role change;
        the controller-mode broker learns it after the service was built)."""
        self.local_broker_id = broker_id
        self.master.sync_state.local_id = broker_id

    # -- role changes (ha.md section 3.9) ---------------------------------------------------------

    async def change_to_master(self, epoch: int) -> bool:
        """``changeToMaster``: become master of ``epoch`` (False: the epoch is stale)."""
        if epoch < self.epochs.last_epoch():
            log.error("change to master refused, epoch is stale", epoch=epoch,
                      last=self.epochs.last_epoch())  # fmt: skip
            return False
        if self.client is not None:
            await self.client.stop()
            self.client = None
        await self.master.close_connections()
        await self.store.settle_tail(keep=True)
        await truncate_invalid_tail(self.store, self.epochs)
        await self._record_epoch(epoch)
        self.master.sync_state.set_sync_state_set(frozenset({self.local_broker_id}))
        self.is_master = True
        self.store.wake_dispatch()
        await wait_until(
            lambda: self.store.dispatched_offset >= self.store.max_phy_offset,
            DISPATCH_CATCH_UP_S,
        )
        self.store.recover_topic_queue_table()
        log.info("change to master", epoch=epoch, max_offset=self.store.max_phy_offset)
        return True

    async def change_to_master_when_last_role_is_master(self, epoch: int) -> bool:
        """Re-elected master: only record the new epoch."""
        if epoch < self.epochs.last_epoch():
            return False
        await self.store.settle_tail(keep=True)
        await self._record_epoch(epoch)
        return True

    async def _record_epoch(self, epoch: int) -> None:
        """Record ``epoch`` as starting at the current max offset (callers refused older ones).

        Decided (stricter than upstream, H-06): upstream removes entries with epoch >= the new
        one and re-appends it at the max offset. When the last entry *is* this epoch (a master
        restarted and named master of the same epoch again), that moves its start: the bytes
        written earlier in the epoch end up in the previous epoch or in none, and an empty
        slave then gets only heartbeats ("cannot find epoch"). The entry is kept instead. A
        new epoch whose previous one owns no data replaces it (``epoch_entries.append_entry``).
        """
        if self.epochs.last_epoch() == epoch:
            log.info("epoch already recorded, keeping its start", epoch=epoch,
                     entry=str(self.epochs.last_entry()))  # fmt: skip
        else:
            entry = EpochEntry(epoch=epoch, start_offset=self.store.max_phy_offset)
            await self.epochs.append_entry(entry)
        self.epoch = epoch

    async def change_to_slave(
        self, master_ha_address: str | None, epoch: int, broker_id: int
    ) -> bool:
        """``changeToSlave``: follow the master at ``master_ha_address`` (may come later via
        :meth:`update_ha_master_address`) as ``broker_id``. False: the epoch is stale."""
        if epoch < self.epochs.last_epoch():
            log.error("change to slave refused, epoch is stale", epoch=epoch,
                      last=self.epochs.last_epoch())  # fmt: skip
            return False
        self.is_master = False
        self.master.fail_waiters()
        await self.master.close_connections()
        if self.client is not None:
            await self.client.stop()
        # Before the client asks the master for bytes: a torn tail would stay otherwise.
        await self.store.settle_tail(keep=False)
        self.set_local_broker_id(broker_id)
        self.client = AutoSwitchHAClient(self.store, self.epochs, self.config,
                                         broker_id=broker_id, clock=self.clock)  # fmt: skip
        self.client.update_ha_master_address(master_ha_address)
        self.client.start()
        self.epoch = epoch
        log.info("change to slave", epoch=epoch, master=master_ha_address, broker_id=broker_id)
        return True

    def change_to_slave_when_master_not_change(self, epoch: int) -> None:
        """Same master, new epoch: only remember it."""
        self.epoch = max(self.epoch, epoch)

    def update_ha_master_address(self, address: str | None) -> None:
        """The master's HA address from the NameServer registration result (ha.md section 1)."""
        if self.client is not None:
            self.client.update_ha_master_address(address)

    # -- SyncStateSet and confirm offset ----------------------------------------------------------

    def set_sync_state_set(self, members: frozenset[int]) -> None:
        """The controller's SyncStateSet (``setSyncStateSet``). Sends waiting for every member's
        ack are checked against it at once: after a slave died, the set without it is what they
        wait for from now on (they would otherwise wait for the next ack report, up to the
        send's deadline)."""
        self.master.sync_state.set_sync_state_set(members)
        if self.is_master:
            self.master.recheck_waiters()

    def sync_state_set(self) -> frozenset[int]:
        """The effective SyncStateSet (local set, plus the proposal while synchronizing)."""
        return self.master.sync_state.effective()

    def shrink_sync_state_set(self) -> None:
        """``maybeShrinkSyncStateSet``; the broker calls it every ``checkSyncStateSetPeriod``."""
        if self.is_master:
            self.master.shrink()

    def confirm_offset(self) -> int:
        """Bound of consumable data: the master's computed confirm offset, or the last one the
        master sent this slave (its max offset before any was received)."""
        top = self.store.max_phy_offset
        if self.is_master:
            if not self.config.all_ack_in_sync_state_set or len(self.sync_state_set()) <= 1:
                return top
            return min(self.master.confirm_offset, top)
        received = self.client.confirm_offset if self.client is not None else -1
        return top if received < 0 else received

    def in_sync_replicas_nums(self) -> int:
        """Size of the effective SyncStateSet (the master included)."""
        return len(self.sync_state_set())

    async def wait_for_ack(self, offset: int, timeout_s: float) -> bool:
        """``allAckInSyncStateSet``: every member acked ``offset``; False on timeout."""
        return await self.master.wait_for_all_acks(offset, timeout_s)

    def can_accept(self) -> bool:
        """Send path step 1 (ha.md 3.8): False when the SyncStateSet is smaller than
        ``minInSyncReplicas`` (IN_SYNC_REPLICAS_NOT_ENOUGH, nothing stored)."""
        return self.in_sync_replicas_nums() >= self.config.min_in_sync_replicas

    def waits_for_replicas(self, *, wait_store: bool) -> bool:
        """Whether :meth:`handle_ha` could wait for a send now: False (not the master, no
        ``WAIT``, or nobody to wait for) lets the broker answer it without awaiting."""
        if not self.is_master or not wait_store:
            return False
        if self.config.all_ack_in_sync_state_set:
            return self.in_sync_replicas_nums() > 1
        return self.config.in_sync_replicas > 1

    async def handle_ha(self, end_offset: int, *, wait_store: bool) -> ReplicaStatus:
        """Send path steps 2-3 (ha.md 3.8) for a stored message ending at ``end_offset``.

        Returns:
            PUT_OK, or FLUSH_SLAVE_TIMEOUT after ``slaveTimeout`` without the needed acks (at
            once when this broker is no longer master).
        """
        if not wait_store:
            return ReplicaStatus.PUT_OK
        if not self.is_master:
            # Appended as master, but the role changed before the acks came: the new master
            # may not have it (the broker refuses puts once the role is gone).
            return ReplicaStatus.FLUSH_SLAVE_TIMEOUT
        timeout_s = self.config.slave_timeout_ms / 1000
        if self.config.all_ack_in_sync_state_set:
            if self.in_sync_replicas_nums() <= 1:
                return ReplicaStatus.PUT_OK
            acked = await self.master.wait_for_all_acks(end_offset, timeout_s)
        else:
            need = self.config.in_sync_replicas
            if need <= 1:
                return ReplicaStatus.PUT_OK
            acked = await self.master.wait_for_acks(end_offset, timeout_s, need)
        return ReplicaStatus.PUT_OK if acked else ReplicaStatus.FLUSH_SLAVE_TIMEOUT
