"""ReplicaRole and EpochOnlyRoleHandler: the epoch-guarded role transitions of a controller-mode
broker (controller.md sections 8 and 10, ha.md sections 3.9 and 4), on a real epoch file."""

from __future__ import annotations

from pathlib import Path

from rocketpy.broker.controller_api import MasterInfo
from rocketpy.broker.replica_role import ReplicaRole
from rocketpy.broker.role_handler import EpochOnlyRoleHandler
from rocketpy.store.epoch_cache import EpochFileCache
from rocketpy.store.epoch_entries import EpochEntry

ME = "127.0.0.1:10911"


class RecordingHandler(EpochOnlyRoleHandler):
    """The epoch-only handler, also recording which transition the role asked for."""

    def __init__(self, epochs: EpochFileCache, offset: list[int]) -> None:
        super().__init__(epochs, lambda: offset[0])
        self.calls: list[str] = []

    async def change_to_master(self, epoch: int) -> bool:
        self.calls.append(f"master:{epoch}")
        return await super().change_to_master(epoch)

    async def change_to_master_when_last_role_is_master(self, epoch: int) -> bool:
        self.calls.append(f"remaster:{epoch}")
        return await super().change_to_master_when_last_role_is_master(epoch)

    async def change_to_slave(
        self, master_ha_address: str | None, epoch: int, broker_id: int
    ) -> bool:
        self.calls.append(f"slave:{epoch}:{broker_id}")
        return await super().change_to_slave(master_ha_address, epoch, broker_id)

    def change_to_slave_when_master_not_change(self, epoch: int) -> None:
        self.calls.append(f"same-master:{epoch}")


def _info(
    master: int, epoch: int, members: set[int] | None = None, sss_epoch: int = 0
) -> MasterInfo:
    return MasterInfo(
        master_broker_id=master,
        master_address=f"127.0.0.1:{master}",
        master_epoch=epoch,
        sync_state_set_epoch=sss_epoch or epoch,
        sync_state_set=frozenset(members if members is not None else {master}),
    )


def _role(tmp_path: Path, offset: list[int]) -> tuple[ReplicaRole, RecordingHandler, list[int]]:
    epochs = EpochFileCache(tmp_path / "epochFileCheckpoint")
    handler = RecordingHandler(epochs, offset)
    changes: list[int] = []

    async def changed() -> None:
        changes.append(role.master_epoch)

    role = ReplicaRole(epochs, handler, address=lambda: ME, on_changed=changed)
    role.controller_id = 1
    return role, handler, changes


async def test_replica_role_master_then_stale_then_reelected(tmp_path: Path) -> None:
    """1. elected master at epoch 1 (offset 0); 2. the same news again (epoch 1); 3. re-elected
    at epoch 3 after 100 bytes were written. Expected: 1 -> change_to_master, epoch entry (1, 0);
    2 ignored; 3 -> change_to_master_when_last_role_is_master, entry (3, 100); on_changed ran
    twice; the epoch file on disk holds both entries."""
    offset = [0]
    role, handler, changes = _role(tmp_path, offset)
    assert await role.change(_info(1, 1))
    assert not await role.change(_info(1, 1))
    offset[0] = 100
    assert await role.change(_info(1, 3))
    assert handler.calls == ["master:1", "remaster:3"]
    assert changes == [1, 3]
    assert (role.is_master, role.master_id, role.master_address) == (True, 1, ME)
    reloaded = EpochFileCache.load(tmp_path / "epochFileCheckpoint")
    assert [(e.epoch, e.start_offset) for e in reloaded.entries()] == [(1, 0), (3, 100)]


async def test_replica_role_slave_of_two_masters_in_turn(tmp_path: Path) -> None:
    """1. broker 2 is master at epoch 2; 2. same master at epoch 3; 3. broker 3 at epoch 4.
    Expected: change_to_slave(2, me=1), then the same-master shortcut, then change_to_slave(4);
    no epoch entry is written by a slave; the SyncStateSet follows only newer epochs."""
    role, handler, _ = _role(tmp_path, [0])
    assert await role.change(_info(2, 2, {2}, 2))
    assert await role.change(_info(2, 3, {2}, 1))
    assert await role.change(_info(3, 4, {3}, 5))
    assert handler.calls == ["slave:2:1", "same-master:3", "slave:4:1"]
    assert (role.is_master, role.master_id, role.master_epoch) == (False, 3, 4)
    assert (role.sync_state_set, role.sync_state_set_epoch) == ({3}, 5)
    assert role.epochs.entries() == ()


async def test_replica_role_refused_stale_epoch_keeps_state(tmp_path: Path) -> None:
    """B-08: 1. the epoch file already holds epoch 7; 2. the controller names this broker master
    at epoch 1. Expected: the handler refuses, nothing changes (no role, no callback, file
    untouched)."""
    role, _, changes = _role(tmp_path, [0])
    await role.epochs.init_from_entries([EpochEntry(epoch=7, start_offset=0)])
    assert not await role.change(_info(1, 1))
    assert (role.is_master, role.master_id, role.master_epoch, changes) == (False, None, 0, [])
    assert [e.epoch for e in role.epochs.entries()] == [7]


async def test_replica_role_without_id_or_master_ignores_news(tmp_path: Path) -> None:
    """1. no controller id yet, a master is named; 2. an id, but no master named. Expected:
    both ignored."""
    role, handler, _ = _role(tmp_path, [0])
    role.controller_id = None
    assert not await role.change(_info(1, 1))
    role.controller_id = 1
    none = MasterInfo(
        master_broker_id=None, master_address=None, master_epoch=5,
        sync_state_set_epoch=0, sync_state_set=frozenset(),
    )  # fmt: skip
    assert not await role.change(none)
    assert handler.calls == []


async def test_epoch_only_handler_restart_as_same_epoch_master_keeps_entry(
    tmp_path: Path,
) -> None:
    """ha.md 4.1: 1. master of epoch 1 from offset 0, 500 bytes written; 2. restarted, the
    controller still names it master of epoch 1. Expected: the entry stays (1, 0) -- re-appending
    would move its start to 500 and orphan the first 500 bytes."""
    epochs = EpochFileCache(tmp_path / "epochFileCheckpoint")
    offset = [0]
    handler = EpochOnlyRoleHandler(epochs, lambda: offset[0])
    assert await handler.change_to_master(1)
    offset[0] = 500
    assert await handler.change_to_master(1)
    assert [(e.epoch, e.start_offset) for e in epochs.entries()] == [(1, 0)]
    assert handler.confirm_offset() == 500
