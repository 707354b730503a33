"""JSON bodies of the controller requests, as fastjson writes them (codes.md section 5).

Owns: :class:`SyncStateSet`, :class:`BrokerMemberGroup`, :class:`ElectMasterResponseBody`,
:class:`ReplicaIdentity`, :class:`ReplicasInfo`, :class:`BrokerReplicasInfo` and the broker-name
list of CONTROLLER_GET_SYNC_STATE_DATA, with ``encode_*``/``decode_*`` pairs. Must not: know
controller semantics. Mirrors ``remoting/.../protocol/body/SyncStateSet``,
``ElectMasterResponseBody``, ``BrokerMemberGroup``, ``BrokerReplicasInfo`` (``RemotingSerializable``
encodings: keys sorted, null fields left out, ``Map<Long, String>`` keys unquoted).

Examples::

    {"syncStateSet":[1,2],"syncStateSetEpoch":2}
    {"brokerMemberGroup":{"brokerAddrs":{1:"10.0.0.1:10911"},"brokerName":"broker-a",
     "cluster":"DefaultCluster"},"syncStateSet":[1]}

Java ``HashSet``/``HashMap`` iteration order is not reproducible; ids are written ascending (what
a small-``Long`` ``HashSet`` yields) and broker names sorted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketpy.common import fastjson
from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import Bean


def _obj(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise CodecError(f"expected a JSON object, got {type(value).__name__}", field=name)
    return value


def _int(value: Any, name: str) -> int:
    # fastjson also reads numeric strings into number fields.
    if isinstance(value, bool):
        raise CodecError("expected a number, got a boolean", field=name)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise CodecError(f"expected a number, got {value!r}", field=name)


def _opt_int(obj: Mapping[str, Any], key: str, name: str) -> int | None:
    value = obj.get(key)
    return None if value is None else _int(value, f"{name}.{key}")


def _opt_str(obj: Mapping[str, Any], key: str, name: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise CodecError(f"expected a string, got {value!r}", field=f"{name}.{key}")


def _ids(value: Any, name: str) -> frozenset[int]:
    if value is None:
        return frozenset()
    if not isinstance(value, list):
        raise CodecError("expected an array of ids", field=name)
    return frozenset(_int(v, name) for v in value)


def _sorted_ids(ids: Iterable[int]) -> list[int]:
    return sorted(ids)


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncStateSet:
    """``SyncStateSet``: the in-sync replica ids and the epoch of that set."""

    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    def to_json_value(self) -> Bean:
        """The fastjson bean."""
        return Bean(
            syncStateSet=_sorted_ids(self.sync_state_set),
            syncStateSetEpoch=self.sync_state_set_epoch,
        )

    @classmethod
    def from_json_value(cls, value: Any, name: str = "SyncStateSet") -> SyncStateSet:
        """Decode a parsed JSON object."""
        obj = _obj(value, name)
        return cls(
            sync_state_set=_ids(obj.get("syncStateSet"), f"{name}.syncStateSet"),
            sync_state_set_epoch=_opt_int(obj, "syncStateSetEpoch", name) or 0,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerMemberGroup:
    """``BrokerMemberGroup``: every replica's address by broker id."""

    cluster: str
    broker_name: str
    broker_addrs: Mapping[int, str] = field(default_factory=dict)

    def to_json_value(self) -> Bean:
        """The fastjson bean (``brokerAddrs`` keys unquoted, ascending)."""
        return Bean(
            brokerAddrs={k: self.broker_addrs[k] for k in sorted(self.broker_addrs)},
            brokerName=self.broker_name,
            cluster=self.cluster,
        )

    @classmethod
    def from_json_value(cls, value: Any, name: str = "BrokerMemberGroup") -> BrokerMemberGroup:
        """Decode a parsed JSON object (integer keys arrive as strings)."""
        obj = _obj(value, name)
        addrs = _obj(obj.get("brokerAddrs") or {}, f"{name}.brokerAddrs")
        return cls(
            cluster=_opt_str(obj, "cluster", name) or "",
            broker_name=_opt_str(obj, "brokerName", name) or "",
            broker_addrs={_int(k, f"{name}.brokerAddrs"): str(v) for k, v in addrs.items()},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectMasterResponseBody:
    """``ElectMasterResponseBody``: the member group (only after a new election) and the set."""

    broker_member_group: BrokerMemberGroup | None = None
    sync_state_set: frozenset[int] = frozenset()

    def to_json_value(self) -> Bean:
        """The fastjson bean."""
        group = self.broker_member_group
        return Bean(
            brokerMemberGroup=None if group is None else group.to_json_value(),
            syncStateSet=_sorted_ids(self.sync_state_set),
        )

    @classmethod
    def from_json_value(
        cls, value: Any, name: str = "ElectMasterResponseBody"
    ) -> ElectMasterResponseBody:
        """Decode a parsed JSON object."""
        obj = _obj(value, name)
        group = obj.get("brokerMemberGroup")
        return cls(
            broker_member_group=None
            if group is None
            else BrokerMemberGroup.from_json_value(group, f"{name}.brokerMemberGroup"),
            sync_state_set=_ids(obj.get("syncStateSet"), f"{name}.syncStateSet"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaIdentity:
    """``BrokerReplicasInfo.ReplicaIdentity``."""

    broker_name: str
    broker_id: int
    broker_address: str
    alive: bool

    def to_json_value(self) -> Bean:
        """The fastjson bean."""
        return Bean(
            alive=self.alive,
            brokerAddress=self.broker_address,
            brokerId=self.broker_id,
            brokerName=self.broker_name,
        )

    @classmethod
    def from_json_value(cls, value: Any, name: str = "ReplicaIdentity") -> ReplicaIdentity:
        """Decode a parsed JSON object."""
        obj = _obj(value, name)
        return cls(
            broker_name=_opt_str(obj, "brokerName", name) or "",
            broker_id=_opt_int(obj, "brokerId", name) or 0,
            broker_address=_opt_str(obj, "brokerAddress", name) or "",
            alive=bool(obj.get("alive")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicasInfo:
    """``BrokerReplicasInfo.ReplicasInfo`` of one broker-set."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: tuple[ReplicaIdentity, ...] = ()
    not_in_sync_replicas: tuple[ReplicaIdentity, ...] = ()

    def to_json_value(self) -> Bean:
        """The fastjson bean."""
        return Bean(
            inSyncReplicas=[r.to_json_value() for r in self.in_sync_replicas],
            masterAddress=self.master_address,
            masterBrokerId=self.master_broker_id,
            masterEpoch=self.master_epoch,
            notInSyncReplicas=[r.to_json_value() for r in self.not_in_sync_replicas],
            syncStateSetEpoch=self.sync_state_set_epoch,
        )

    @classmethod
    def from_json_value(cls, value: Any, name: str = "ReplicasInfo") -> ReplicasInfo:
        """Decode a parsed JSON object."""
        obj = _obj(value, name)

        def replicas(key: str) -> tuple[ReplicaIdentity, ...]:
            items = obj.get(key) or []
            if not isinstance(items, list):
                raise CodecError("expected an array", field=f"{name}.{key}")
            return tuple(ReplicaIdentity.from_json_value(v, f"{name}.{key}") for v in items)

        return cls(
            master_broker_id=_opt_int(obj, "masterBrokerId", name),
            master_address=_opt_str(obj, "masterAddress", name),
            master_epoch=_opt_int(obj, "masterEpoch", name) or 0,
            sync_state_set_epoch=_opt_int(obj, "syncStateSetEpoch", name) or 0,
            in_sync_replicas=replicas("inSyncReplicas"),
            not_in_sync_replicas=replicas("notInSyncReplicas"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerReplicasInfo:
    """``BrokerReplicasInfo``: the CONTROLLER_GET_SYNC_STATE_DATA response body."""

    replicas_info_table: Mapping[str, ReplicasInfo] = field(default_factory=dict)

    def to_json_value(self) -> Bean:
        """The fastjson bean (broker names sorted)."""
        table = self.replicas_info_table
        return Bean(replicasInfoTable={k: table[k].to_json_value() for k in sorted(table)})

    @classmethod
    def from_json_value(cls, value: Any, name: str = "BrokerReplicasInfo") -> BrokerReplicasInfo:
        """Decode a parsed JSON object."""
        obj = _obj(value, name)
        table = _obj(obj.get("replicasInfoTable") or {}, f"{name}.replicasInfoTable")
        return cls(
            replicas_info_table={
                str(k): ReplicasInfo.from_json_value(v, f"{name}.replicasInfoTable.{k}")
                for k, v in table.items()
            }
        )


def encode_body(value: SyncStateSet | ElectMasterResponseBody | BrokerReplicasInfo) -> bytes:
    """``RemotingSerializable.encode()`` of a controller body (compact fastjson, UTF-8)."""
    return fastjson.dumps(value.to_json_value()).encode()


def decode_sync_state_set(data: bytes) -> SyncStateSet:
    """Decode a ``SyncStateSet`` body; raises CodecError."""
    return SyncStateSet.from_json_value(fastjson.loads(data))


def decode_elect_master_body(data: bytes) -> ElectMasterResponseBody:
    """Decode an ``ElectMasterResponseBody``; raises CodecError."""
    return ElectMasterResponseBody.from_json_value(fastjson.loads(data))


def decode_broker_replicas_info(data: bytes) -> BrokerReplicasInfo:
    """Decode a ``BrokerReplicasInfo``; raises CodecError."""
    return BrokerReplicasInfo.from_json_value(fastjson.loads(data))


def encode_broker_names(names: Iterable[str]) -> bytes:
    """The CONTROLLER_GET_SYNC_STATE_DATA request body: a JSON array of broker names."""
    return fastjson.dumps(list(names)).encode()


def decode_broker_names(data: bytes) -> list[str]:
    """Decode the broker-name array; raises CodecError."""
    value = fastjson.loads(data)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CodecError("expected a JSON array of broker names", field="brokerNames")
    return value
