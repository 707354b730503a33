"""The two per-broker-set records of the controller's replicated state.

Owns: :class:`BrokerReplicaInfo` (ids, addresses, register check codes, the next id to assign)
and :class:`SyncStateInfo` (master, master epoch, SyncStateSet and its epoch). Must not: be
mutated outside :meth:`ReplicasInfoManager.apply` (controller.md section 5). Mirrors
``controller/.../impl/manager/BrokerReplicaInfo.java`` and ``SyncStateInfo.java``. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from rocketpy.common.types import BrokerId, MasterEpoch, SyncStateSetEpoch

#: ``MixAll.FIRST_BROKER_CONTROLLER_ID``: the first id of every broker-set.
FIRST_BROKER_CONTROLLER_ID: Final = 1
#: Both epochs of a broker-set before its first election.
NO_MASTER_EPOCH: Final = MasterEpoch(0)
NO_SYNC_STATE_SET_EPOCH: Final = SyncStateSetEpoch(0)


@dataclass(slots=True)
class BrokerReplicaInfo:
    """Replicas of one broker-set.

    Invariant: ``next_assign_broker_id`` = 1 + the number of ids ever added (upstream
    increments it on every add, whatever the id; removals never decrement it).
    """

    cluster_name: str
    broker_name: str
    next_assign_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    broker_id_info: dict[int, tuple[str, str]] = field(default_factory=dict)  # id -> (addr, code)

    def add_broker(self, broker_id: int, address: str, register_check_code: str) -> None:
        """``addBroker``: record the id and advance the counter."""
        self.broker_id_info[broker_id] = (address, register_check_code)
        self.next_assign_broker_id += 1

    def remove_broker_id(self, broker_id: int) -> None:
        """``removeBrokerId`` (the counter stays)."""
        self.broker_id_info.pop(broker_id, None)

    def is_broker_exist(self, broker_id: int | None) -> bool:
        """Is ``broker_id`` a known replica?"""
        return broker_id is not None and broker_id in self.broker_id_info

    def all_brokers(self) -> frozenset[int]:
        """Every replica id (``getAllBroker``)."""
        return frozenset(self.broker_id_info)

    def broker_id_table(self) -> dict[int, str]:
        """id -> address, ascending ids (``getBrokerIdTable``)."""
        return {i: self.broker_id_info[i][0] for i in sorted(self.broker_id_info)}

    def broker_address(self, broker_id: int | None) -> str | None:
        """Address of ``broker_id``, None if unknown."""
        if broker_id is None or broker_id not in self.broker_id_info:
            return None
        return self.broker_id_info[broker_id][0]

    def register_check_code(self, broker_id: int) -> str | None:
        """Check code recorded when ``broker_id`` was applied."""
        info = self.broker_id_info.get(broker_id)
        return None if info is None else info[1]

    def update_broker_address(self, broker_id: int, address: str) -> None:
        """``updateBrokerAddress``: new address, same check code; unknown ids are ignored."""
        info = self.broker_id_info.get(broker_id)
        if info is not None:
            self.broker_id_info[broker_id] = (address, info[1])


@dataclass(slots=True)
class SyncStateInfo:
    """Master and SyncStateSet of one broker-set.

    Invariants: ``master_epoch`` and ``sync_state_set_epoch`` never decrease; both start at 0
    and ``master_epoch == 0`` means no election ever happened (``isFirstTimeForElect``).
    """

    cluster_name: str
    broker_name: str
    master_epoch: MasterEpoch = NO_MASTER_EPOCH
    sync_state_set_epoch: SyncStateSetEpoch = NO_SYNC_STATE_SET_EPOCH
    sync_state_set: frozenset[BrokerId] = frozenset()
    master_broker_id: BrokerId | None = None

    def update_master_info(self, master_broker_id: BrokerId | None) -> None:
        """``updateMasterInfo``: new master (or none) and ``masterEpoch + 1``."""
        self.master_broker_id = master_broker_id
        self.master_epoch = MasterEpoch(self.master_epoch + 1)

    def update_sync_state_set_info(self, new_set: frozenset[BrokerId]) -> None:
        """``updateSyncStateSetInfo``: replace the set and ``syncStateSetEpoch + 1``."""
        self.sync_state_set = frozenset(new_set)
        self.sync_state_set_epoch = SyncStateSetEpoch(self.sync_state_set_epoch + 1)

    def is_first_time_for_elect(self) -> bool:
        """No master was ever elected."""
        return self.master_epoch == 0

    def remove_from_sync_state(self, broker_id: BrokerId) -> None:
        """``removeFromSyncState`` (no epoch change, as upstream)."""
        self.sync_state_set = self.sync_state_set - {broker_id}
