"""What the controller-mode broker asks of its replication layer when its role changes.

Owns: the :class:`RoleHandler` protocol (the subset of ``AutoSwitchHAService`` that
``ReplicasManager`` calls, ha.md section 3.9) and :class:`EpochOnlyRoleHandler`, the handler used
when the broker runs without HA settings (the CLI always gives them, so ``mqbroker`` replicates
with ``AutoSwitchHAService``; in-process brokers may run without): it keeps the epoch file as
``changeToMaster`` would (new epoch entry at the commit log's max offset) but replicates
nothing, so a SyncStateSet never grows beyond the master.
Must not: talk to the controller or the NameServer.
``rocketpy.ha.autoswitch.service.AutoSwitchHAService`` satisfies :class:`RoleHandler` as is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import structlog

from rocketpy.store.epoch_cache import EpochFileCache
from rocketpy.store.epoch_entries import EpochEntry

log = structlog.get_logger(__name__)


class RoleHandler(Protocol):
    """Replication side of a role change (``AutoSwitchHAService``)."""

    def set_local_broker_id(self, broker_id: int) -> None:
        """This broker's controller-assigned id (called once it is obtained)."""
        ...

    async def change_to_master(self, epoch: int) -> bool:
        """Become master of ``epoch`` (truncate, record the epoch); False if stale."""
        ...

    async def change_to_master_when_last_role_is_master(self, epoch: int) -> bool:
        """Re-elected master: record ``epoch`` only; False if stale."""
        ...

    async def change_to_slave(
        self, master_ha_address: str | None, epoch: int, broker_id: int
    ) -> bool:
        """Follow a new master as ``broker_id`` (HA address may come later); False if stale."""
        ...

    def change_to_slave_when_master_not_change(self, epoch: int) -> None:
        """Same master, new epoch: remember it."""
        ...

    def set_sync_state_set(self, members: frozenset[int]) -> None:
        """Adopt the controller's SyncStateSet."""
        ...

    def shrink_sync_state_set(self) -> None:
        """Periodic SyncStateSet check (master): propose a shrunk set if a slave lags."""
        ...

    def confirm_offset(self) -> int:
        """The confirm offset reported in heartbeats."""
        ...


class EpochOnlyRoleHandler:
    """A :class:`RoleHandler` without replication: epoch file upkeep only."""

    def __init__(self, epochs: EpochFileCache, max_offset: Callable[[], int]) -> None:
        """Args: ``epochs`` this broker's epoch file; ``max_offset`` the commit log's end."""
        self._epochs = epochs
        self._max_offset = max_offset
        self._members: frozenset[int] = frozenset()

    def set_local_broker_id(self, broker_id: int) -> None:
        """Not needed: nothing replicates."""
        del broker_id

    async def change_to_master(self, epoch: int) -> bool:
        """Append ``EpochEntry(epoch, maxPhyOffset)`` (ha.md 3.9 without truncation: with no
        replication the local log is the only copy, so nothing is divergent)."""
        return await self._record(epoch)

    async def change_to_master_when_last_role_is_master(self, epoch: int) -> bool:
        """Same as :meth:`change_to_master`."""
        return await self._record(epoch)

    async def change_to_slave(
        self, master_ha_address: str | None, epoch: int, broker_id: int
    ) -> bool:
        """Accept unless stale; a slave records epochs only from replicated data."""
        del master_ha_address, broker_id
        return self._not_stale(epoch)

    def change_to_slave_when_master_not_change(self, epoch: int) -> None:
        """Nothing to record."""
        del epoch

    def set_sync_state_set(self, members: frozenset[int]) -> None:
        """Remember the set (nothing replicates to it)."""
        self._members = members

    def shrink_sync_state_set(self) -> None:
        """No slaves are tracked, so nothing ever shrinks."""

    def confirm_offset(self) -> int:
        """Everything written is confirmed (single copy)."""
        return self._max_offset()

    def _not_stale(self, epoch: int) -> bool:
        last = self._epochs.last_epoch()
        if epoch < last:
            log.error("role change refused, epoch is stale", epoch=epoch, last=last)
            return False
        return True

    async def _record(self, epoch: int) -> bool:
        if not self._not_stale(epoch):
            return False
        if self._epochs.last_epoch() == epoch:
            # Restarted while still master of this epoch: the entry already owns its data;
            # re-appending would move its start offset (and orphan the bytes before it).
            return True
        await self._epochs.append_entry(EpochEntry(epoch=epoch, start_offset=self._max_offset()))
        return True
