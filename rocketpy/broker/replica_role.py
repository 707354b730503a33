"""ReplicaRole: a controller-mode broker's role in its broker-set and the guarded transitions.

Owns: who this broker is (the controller-assigned id), whether it is master, the master's id,
address and epoch, the SyncStateSet it knows, and ``changeBrokerRole`` -- to master / to slave
exactly as controller.md section 10 -- under one lock, so a NOTIFY_BROKER_ROLE_CHANGED, an
election answer and a metadata sync carrying the same news apply it once and in epoch order.
Must not: talk to the controller (``broker/replicas_manager.py`` does) or replicate data (the
:class:`~rocketpy.broker.role_handler.RoleHandler` does). Mirrors the role half of
``broker/controller/ReplicasManager`` (changeBrokerRole, changeToMaster, changeToSlave).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from rocketpy.broker.controller_api import MasterInfo
from rocketpy.broker.role_handler import RoleHandler
from rocketpy.store.epoch_cache import EpochFileCache

log = structlog.get_logger(__name__)


class ReplicaRole:
    """The role state; mutated only by :meth:`change` and :meth:`adopt_sync_state_set`."""

    def __init__(
        self,
        epochs: EpochFileCache,
        handler: RoleHandler,
        *,
        address: Callable[[], str],
        on_changed: Callable[[], Awaitable[None]],
    ) -> None:
        """Args: ``epochs``/``handler`` the epoch file and replication side (replaced once the
        file is opened); ``address`` this broker's ``ip:port``; ``on_changed`` awaited after
        each applied change, still under the lock."""
        self.epochs = epochs
        self.handler = handler
        self._address = address
        self._on_changed = on_changed
        self._lock = asyncio.Lock()
        #: The id the controller assigned (``brokerControllerId``); None until obtained.
        self.controller_id: int | None = None
        self.is_master = False
        self.master_id: int | None = None
        self.master_address: str | None = None
        #: Invariant: only grows; every applied change carries a strictly greater epoch.
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0

    async def change(self, info: MasterInfo) -> bool:
        """``changeBrokerRole``: become master (if ``info`` names this broker) or slave.

        Returns:
            True when applied; False when stale (epoch not newer), unnamed, before this
            broker has an id, or refused by the role handler.
        """
        async with self._lock:
            if info.master_broker_id is None or info.master_epoch <= self.master_epoch:
                return False
            if self.controller_id is None:
                return False
            if info.master_broker_id == self.controller_id:
                applied = await self._to_master(info)
            else:
                applied = await self._to_slave(info, self.controller_id)
            if applied:
                await self._on_changed()
        return applied

    async def follow_moved_master(self, info: MasterInfo) -> bool:
        """A slave's master moved: the controller names the same master in the same epoch at
        another address (it restarted on another host or port before its heartbeat expired,
        so nobody was elected and no role change was sent). Take the new address, so that the
        NameServer's listing of it is accepted again and the HA client follows its new
        ``haServerAddr`` (``registration.py``). True when the address changed."""
        async with self._lock:
            if (
                self.is_master
                or info.master_broker_id is None
                or info.master_broker_id != self.master_id
                or info.master_epoch != self.master_epoch
                or not info.master_address
                or info.master_address == self.master_address
            ):
                return False
            log.info(
                "master moved, following it",
                master=info.master_broker_id,
                master_epoch=info.master_epoch,
                old=self.master_address,
                new=info.master_address,
            )
            self.master_address = info.master_address
        return True

    async def _to_master(self, info: MasterInfo) -> bool:
        epoch = info.master_epoch
        if self.is_master:
            ok = await self.handler.change_to_master_when_last_role_is_master(epoch)
        else:
            ok = await self.handler.change_to_master(epoch)
        if not ok:
            self._report_refused(epoch)
            return False
        self.is_master = True
        self.master_id = self.controller_id
        self.master_address = self._address()
        self.master_epoch = epoch
        self.adopt_sync_state_set(info.sync_state_set, info.sync_state_set_epoch)
        log.info(
            "change broker role to master",
            master_epoch=epoch,
            sync_state_set=sorted(self.sync_state_set),
        )
        return True

    async def _to_slave(self, info: MasterInfo, me: int) -> bool:
        epoch = info.master_epoch
        if not self.is_master and self.master_id == info.master_broker_id:
            self.handler.change_to_slave_when_master_not_change(epoch)
        # The HA address is learnt from the NameServer registration result (ha.md section 1).
        elif not await self.handler.change_to_slave(None, epoch, me):
            self._report_refused(epoch)
            return False
        self.is_master = False
        self.master_id = info.master_broker_id
        self.master_address = info.master_address
        self.master_epoch = epoch
        if info.sync_state_set_epoch > self.sync_state_set_epoch:
            self.sync_state_set = info.sync_state_set
            self.sync_state_set_epoch = info.sync_state_set_epoch
        log.info(
            "change broker role to slave",
            master=info.master_broker_id,
            master_address=info.master_address,
            master_epoch=epoch,
        )
        return True

    def _report_refused(self, epoch: int) -> None:
        """B-08: a local epoch history newer than the controller's would leave the broker
        fenced forever; say which file and epochs disagree and how to recover (stricter than
        upstream, which stays silent)."""
        log.error(
            "role change refused: the local epoch file is ahead of the controller's master "
            "epoch; the broker stays fenced. Recover by removing the epoch file (and its .bak) "
            "if this replica's data may be discarded, or by cleaning the broker-set in the "
            "controller (mqadmin cleanBrokerMetadata) and restarting its replicas",
            epoch_file=str(self.epochs.path),
            local_epoch=self.epochs.last_epoch(),
            controller_master_epoch=epoch,
        )

    def adopt_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        """Take ``members`` if ``epoch`` is newer than the set held, and tell the handler."""
        if epoch > self.sync_state_set_epoch and members:
            self.sync_state_set, self.sync_state_set_epoch = members, epoch
            self.handler.set_sync_state_set(members)
