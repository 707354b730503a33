"""Serialize and restore the whole controller state, deterministically.

Owns: :func:`encode_state` / :func:`restore_state` for :class:`ReplicasInfoManager` (the bytes
the Raft driver stores as a snapshot). Must not: do I/O. Upstream uses Hessian per table entry
(``ReplicasInfoManager.serialize``); ours is msgpack with a leading format version, broker
names and ids sorted, so equal states give equal bytes:

| position | value |
| --- | --- |
| 0 | format version (1) |
| 1 | replica table: ``[[brokerName, clusterName, nextAssignBrokerId, [[id, addr, code]...]]...]`` |
| 2 | sync state table: ``[[brokerName, clusterName, masterEpoch, syncStateSetEpoch,
  [ids], masterBrokerId|nil]...]`` |
"""

from __future__ import annotations

from typing import Any, Final

import msgpack

from rocketpy.common.errors import CodecError
from rocketpy.common.types import BrokerId, MasterEpoch, SyncStateSetEpoch
from rocketpy.controller.state.replicas_info import ReplicasInfoManager
from rocketpy.controller.state.sync_state import BrokerReplicaInfo, SyncStateInfo

FORMAT_VERSION: Final = 1


def encode_state(manager: ReplicasInfoManager) -> bytes:
    """The snapshot bytes of ``manager``'s two tables."""
    replicas = [
        [
            name,
            r.cluster_name,
            r.next_assign_broker_id,
            [[i, *r.broker_id_info[i]] for i in sorted(r.broker_id_info)],
        ]
        for name, r in sorted(manager.replica_info_table.items())
    ]
    sync = [
        [
            name,
            s.cluster_name,
            s.master_epoch,
            s.sync_state_set_epoch,
            sorted(s.sync_state_set),
            s.master_broker_id,
        ]
        for name, s in sorted(manager.sync_state_set_info_table.items())
    ]
    packed: bytes = msgpack.packb([FORMAT_VERSION, replicas, sync])
    return packed


def _fields(value: Any, size: int, where: str) -> list[Any]:
    if not isinstance(value, list) or len(value) != size:
        raise CodecError(f"expected {size} items", field=where)
    return value


def _replica(value: Any) -> BrokerReplicaInfo:
    name, cluster, next_id, ids = _fields(value, 4, "snapshot.replicas")
    info = BrokerReplicaInfo(cluster_name=cluster, broker_name=name, next_assign_broker_id=next_id)
    for item in ids:
        broker_id, addr, code = _fields(item, 3, f"snapshot.replicas.{name}")
        info.broker_id_info[broker_id] = (addr, code)
    return info


def _sync(value: Any) -> SyncStateInfo:
    name, cluster, master_epoch, set_epoch, ids, master = _fields(value, 6, "snapshot.syncState")
    return SyncStateInfo(
        cluster_name=cluster,
        broker_name=name,
        master_epoch=MasterEpoch(master_epoch),
        sync_state_set_epoch=SyncStateSetEpoch(set_epoch),
        sync_state_set=frozenset(BrokerId(i) for i in ids),
        master_broker_id=None if master is None else BrokerId(master),
    )


def restore_state(manager: ReplicasInfoManager, data: bytes) -> None:
    """Replace ``manager``'s tables by the snapshot ``data`` (``deserializeFrom``).

    Raises:
        CodecError: not a snapshot of this format; ``manager`` is left unchanged.
    """
    try:
        items = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException) as e:
        raise CodecError(f"not a controller snapshot: {e}", field="snapshot") from e
    version, replicas, sync = _fields(items, 3, "snapshot")
    if version != FORMAT_VERSION:
        raise CodecError(f"unsupported format version {version!r}", field="snapshot.version")
    try:
        replica_table = {r.broker_name: r for r in map(_replica, replicas)}
        sync_table = {s.broker_name: s for s in map(_sync, sync)}
    except (TypeError, ValueError) as e:
        raise CodecError(f"bad snapshot content: {e}", field="snapshot") from e
    manager.replica_info_table = replica_table
    manager.sync_state_set_info_table = sync_table
