"""The controller's replicated state machine (RIP-44): decide, then apply.

Owns: :class:`ReplicasInfoManager` (broker-sets, their replicas and sync state) and
:class:`ControllerResult`. Every request method validates against the current state, in exactly
the order of controller.md section 4, and returns events plus the response without changing
anything; :meth:`ReplicasInfoManager.apply` is the only mutator and runs for every committed
event, in log order, on every node. Must not: do I/O or look up liveness itself (it is an
argument). Mirrors ``controller/.../impl/manager/ReplicasInfoManager.java`` (5.1.1+); shaped
like mxsm/rocketmq-rust ``rocketmq-controller/src/manager/replicas_info_manager.rs``.

State-machine contract (hashicorp/raft ``fsm.go``): ``apply`` is deterministic, total (an event
about an unknown broker-set is ignored, as upstream) and never raises on a decoded event;
``snapshot.encode_state``/``restore_state`` round-trip the whole state, so replaying the log
after a restored snapshot yields the same state as replaying it from the start.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from rocketpy.common.codes import ResponseCode
from rocketpy.common.types import BrokerId
from rocketpy.controller.state.elect_policy import BrokerLiveness, DefaultElectPolicy
from rocketpy.controller.state.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    UpdateBrokerAddressEvent,
)
from rocketpy.controller.state.sync_state import (
    FIRST_BROKER_CONTROLLER_ID,
    BrokerReplicaInfo,
    SyncStateInfo,
)
from rocketpy.remoting.protocol.bodies.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
    encode_body,
)
from rocketpy.remoting.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    ApplyBrokerIdResponseHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
)

H = TypeVar("H")
_JAVA_LONG: Final = re.compile(r"[+-]?\d+")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerResult(Generic[H]):
    """What a request decided (``ControllerResult``): events to commit, then the response."""

    events: tuple[Event, ...] = ()
    response: H | None = None
    body: bytes | None = None
    code: int = ResponseCode.SUCCESS
    remark: str | None = None


def _fail(code: ResponseCode, remark: str, response: H | None = None) -> ControllerResult[H]:
    return ControllerResult(response=response, code=code, remark=remark)


def parse_java_long_set(text: str) -> frozenset[int]:
    """``Stream.of(text.split(";")).map(Long::valueOf)`` with Java's rules.

    Raises:
        ValueError: with ``NumberFormatException.toString()``'s text for the bad item.
    """
    parts = text.split(";")
    while parts and parts[-1] == "":  # String.split drops trailing empty strings
        parts.pop()
    out = set()
    for part in parts:
        if not _JAVA_LONG.fullmatch(part) or not _LONG_MIN <= int(part) <= _LONG_MAX:
            raise ValueError(f'java.lang.NumberFormatException: For input string: "{part}"')
        out.add(int(part))
    return frozenset(out)


class ReplicasInfoManager:
    """Broker-sets by name: :class:`BrokerReplicaInfo` and :class:`SyncStateInfo`.

    Args:
        enable_elect_unclean_master: ``enableElectUncleanMaster`` (elect outside the
            SyncStateSet when nobody in it is alive).
        elect_policy: the master election policy.
    """

    def __init__(
        self,
        *,
        enable_elect_unclean_master: bool = False,
        elect_policy: DefaultElectPolicy | None = None,
    ) -> None:
        self.enable_elect_unclean_master = enable_elect_unclean_master
        self.elect_policy = elect_policy or DefaultElectPolicy()
        self.replica_info_table: dict[str, BrokerReplicaInfo] = {}
        self.sync_state_set_info_table: dict[str, SyncStateInfo] = {}

    def is_contains_broker(self, broker_name: str) -> bool:
        """A broker-set exists only if both tables know it (``isContainsBroker``)."""
        return (
            broker_name in self.replica_info_table and broker_name in self.sync_state_set_info_table
        )

    # ------------------------------------------------------------------------------------------
    # requests (no mutation)

    def alter_sync_state_set(
        self,
        request: AlterSyncStateSetRequestHeader,
        sync_state_set: SyncStateSet,
        liveness: BrokerLiveness,
    ) -> ControllerResult[AlterSyncStateSetResponseHeader]:
        """CONTROLLER_ALTER_SYNC_STATE_SET (1001), checks 1-8 of controller.md 4.5 in order."""
        name = request.broker_name
        failed = ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        if not self.is_contains_broker(name):
            return _fail(failed, "Broker metadata is not existed")
        info = self.sync_state_set_info_table[name]
        replicas = self.replica_info_table[name]
        new_set = frozenset(sync_state_set.sync_state_set)
        if new_set == info.sync_state_set:
            return _fail(
                failed,
                "The newSyncStateSet is equal with oldSyncStateSet, "
                "no needed to update syncStateSet",
            )
        if info.master_broker_id is None or info.master_broker_id != request.master_broker_id:
            return _fail(
                ResponseCode.CONTROLLER_INVALID_MASTER,
                "Rejecting alter syncStateSet request because the current leader is:"
                f"{{{_java(info.master_broker_id)}}}, not {{{request.master_broker_id}}}",
            )
        if request.master_epoch != info.master_epoch:
            return _fail(
                ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                "Rejecting alter syncStateSet request because the current master epoch is:"
                f"{{{info.master_epoch}}}, not {{{request.master_epoch}}}",
            )
        if sync_state_set.sync_state_set_epoch != info.sync_state_set_epoch:
            return _fail(
                ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                "Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
                f"{{{info.sync_state_set_epoch}}}, not {{{sync_state_set.sync_state_set_epoch}}}",
            )
        bad = _check_new_set(new_set, info, replicas, liveness)
        if bad is not None:
            return bad
        epoch = info.sync_state_set_epoch + 1
        return ControllerResult(
            events=(AlterSyncStateSetEvent(broker_name=name, new_sync_state_set=new_set),),
            response=AlterSyncStateSetResponseHeader(new_sync_state_set_epoch=epoch),
            body=encode_body(SyncStateSet(sync_state_set=new_set, sync_state_set_epoch=epoch)),
        )

    def elect_master(
        self, request: ElectMasterRequestHeader, liveness: BrokerLiveness
    ) -> ControllerResult[ElectMasterResponseHeader]:
        """CONTROLLER_ELECT_MASTER (1002), controller.md 4.4 steps 1-6."""
        name = request.broker_name
        if not self.is_contains_broker(name):
            return _fail(
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                "Broker hasn't been registered",
            )
        info = self.sync_state_set_info_table[name]
        replicas = self.replica_info_table[name]
        old_master = info.master_broker_id
        new_master: int | None = None
        if info.is_first_time_for_elect():
            new_master = request.broker_id  # the first master is whoever asks first
        if new_master is None or new_master == -1:
            new_master = self.elect_policy.elect(
                replicas.cluster_name,
                replicas.broker_name,
                sync_state_brokers=info.sync_state_set,
                all_replica_brokers=(
                    replicas.all_brokers() if self.enable_elect_unclean_master else None
                ),
                old_master=old_master,
                prefer_broker_id=request.broker_id if request.designate_elect else None,
                liveness=liveness,
            )
        if new_master is not None and new_master == old_master:
            return ControllerResult(
                response=ElectMasterResponseHeader(
                    master_broker_id=old_master,
                    master_address=replicas.broker_address(old_master),
                    master_epoch=info.master_epoch,
                    sync_state_set_epoch=info.sync_state_set_epoch,
                ),
                body=encode_body(ElectMasterResponseBody(sync_state_set=info.sync_state_set)),
                code=ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                remark=f"The old master {old_master} is still alive, not need to elect new master "
                f"for broker {replicas.broker_name}",
            )
        if new_master is not None:
            group = BrokerMemberGroup(
                cluster=replicas.cluster_name,
                broker_name=replicas.broker_name,
                broker_addrs=replicas.broker_id_table(),
            )
            return ControllerResult(
                events=(
                    ElectMasterEvent(
                        new_master_elected=True, broker_name=name, new_master_broker_id=new_master
                    ),
                ),
                response=ElectMasterResponseHeader(
                    master_broker_id=new_master,
                    master_address=replicas.broker_address(new_master),
                    master_epoch=info.master_epoch + 1,
                    sync_state_set_epoch=info.sync_state_set_epoch + 1,
                ),
                body=encode_body(
                    ElectMasterResponseBody(
                        broker_member_group=group, sync_state_set=frozenset({new_master})
                    )
                ),
            )
        if request.broker_id == -1:
            # Controller-triggered: record that the master is gone (masterEpoch + 1).
            return ControllerResult(
                events=(ElectMasterEvent(new_master_elected=False, broker_name=name),),
                response=ElectMasterResponseHeader(),
                code=ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                remark="Old master has down and failed to elect a new broker master",
            )
        return _fail(
            ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
            "Failed to elect a new master",
            ElectMasterResponseHeader(),
        )

    def get_next_broker_id(
        self, request: GetNextBrokerIdRequestHeader
    ) -> ControllerResult[GetNextBrokerIdResponseHeader]:
        """CONTROLLER_GET_NEXT_BROKER_ID (1012): always SUCCESS."""
        replicas = self.replica_info_table.get(request.broker_name)
        next_id = FIRST_BROKER_CONTROLLER_ID if replicas is None else replicas.next_assign_broker_id
        return ControllerResult(
            response=GetNextBrokerIdResponseHeader(
                cluster_name=request.cluster_name,
                broker_name=request.broker_name,
                next_broker_id=next_id,
            )
        )

    def apply_broker_id(
        self, request: ApplyBrokerIdRequestHeader
    ) -> ControllerResult[ApplyBrokerIdResponseHeader]:
        """CONTROLLER_APPLY_BROKER_ID (1013), controller.md 4.2."""
        name = request.broker_name
        broker_id = request.applied_broker_id
        code = request.register_check_code
        response = ApplyBrokerIdResponseHeader(cluster_name=request.cluster_name, broker_name=name)
        event = ApplyBrokerIdEvent(
            cluster_name=request.cluster_name,
            broker_name=name,
            broker_address=code.split(";")[0],
            register_check_code=code,
            new_broker_id=broker_id,
        )
        replicas = self.replica_info_table.get(name)
        if replicas is None:
            if broker_id == FIRST_BROKER_CONTROLLER_ID:
                return ControllerResult(events=(event,), response=response)
            return _fail(
                ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                f"Broker-set: {name} hasn't been registered in controller, but broker try to "
                f"apply brokerId: {broker_id}",
                response,
            )
        if not replicas.is_broker_exist(broker_id) or code == replicas.register_check_code(
            broker_id
        ):
            # An absent id, or an idempotent retry by the broker that got it.
            return ControllerResult(events=(event,), response=response)
        return _fail(
            ResponseCode.CONTROLLER_BROKER_ID_INVALID,
            f"Fail to apply brokerId: {broker_id} in broker-set: {name}",
            response,
        )

    def register_broker(
        self, request: RegisterBrokerToControllerRequestHeader, liveness: BrokerLiveness
    ) -> ControllerResult[RegisterBrokerToControllerResponseHeader]:
        """CONTROLLER_REGISTER_BROKER (1003), controller.md 4.3."""
        name = request.broker_name
        cluster = request.cluster_name
        bare = RegisterBrokerToControllerResponseHeader(cluster_name=cluster, broker_name=name)
        if not self.is_contains_broker(name):
            return _fail(
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"Broker-set: {name} hasn't been registered in controller",
                bare,
            )
        replicas = self.replica_info_table[name]
        info = self.sync_state_set_info_table[name]
        if not replicas.is_broker_exist(request.broker_id):
            return _fail(
                ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"BrokerId: {request.broker_id} hasn't been registered in broker-set: {name}",
                bare,
            )
        response = bare
        master = info.master_broker_id
        if master is not None and liveness.is_alive(cluster, name, master):
            response = RegisterBrokerToControllerResponseHeader(
                cluster_name=cluster,
                broker_name=name,
                master_broker_id=master,
                master_address=replicas.broker_address(master),
                master_epoch=info.master_epoch,
                sync_state_set_epoch=info.sync_state_set_epoch,
            )
        events: tuple[Event, ...] = ()
        if request.broker_address != replicas.broker_address(request.broker_id):
            events = (
                UpdateBrokerAddressEvent(
                    cluster_name=cluster,
                    broker_name=name,
                    broker_address=request.broker_address,
                    broker_id=request.broker_id,
                ),
            )
        body = SyncStateSet(
            sync_state_set=info.sync_state_set, sync_state_set_epoch=info.sync_state_set_epoch
        )
        return ControllerResult(events=events, response=response, body=encode_body(body))

    def get_replica_info(
        self, request: GetReplicaInfoRequestHeader
    ) -> ControllerResult[GetReplicaInfoResponseHeader]:
        """CONTROLLER_GET_REPLICA_INFO (1004)."""
        name = request.broker_name
        if not self.is_contains_broker(name):
            return _fail(
                ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                "Broker metadata is not existed",
                GetReplicaInfoResponseHeader(),
            )
        info = self.sync_state_set_info_table[name]
        replicas = self.replica_info_table[name]
        master = info.master_broker_id
        body = SyncStateSet(
            sync_state_set=info.sync_state_set, sync_state_set_epoch=info.sync_state_set_epoch
        )
        return ControllerResult(
            response=GetReplicaInfoResponseHeader(
                master_broker_id=master,
                master_address=replicas.broker_address(master),
                master_epoch=info.master_epoch,
            ),
            body=encode_body(body),
        )

    def get_sync_state_data(
        self, broker_names: Iterable[str], liveness: BrokerLiveness
    ) -> ControllerResult[None]:
        """CONTROLLER_GET_SYNC_STATE_DATA (1006); unknown names are left out."""
        table: dict[str, ReplicasInfo] = {}
        for name in broker_names:
            if not self.is_contains_broker(name):
                continue
            info = self.sync_state_set_info_table[name]
            replicas = self.replica_info_table[name]
            in_sync: list[ReplicaIdentity] = []
            not_in_sync: list[ReplicaIdentity] = []
            for broker_id, address in replicas.broker_id_table().items():
                replica = ReplicaIdentity(
                    broker_name=name,
                    broker_id=broker_id,
                    broker_address=address,
                    alive=liveness.is_alive(replicas.cluster_name, name, broker_id),
                )
                (in_sync if broker_id in info.sync_state_set else not_in_sync).append(replica)
            table[name] = ReplicasInfo(
                master_broker_id=info.master_broker_id,
                master_address=replicas.broker_address(info.master_broker_id),
                master_epoch=info.master_epoch,
                sync_state_set_epoch=info.sync_state_set_epoch,
                in_sync_replicas=tuple(in_sync),
                not_in_sync_replicas=tuple(not_in_sync),
            )
        return ControllerResult(body=encode_body(BrokerReplicasInfo(replicas_info_table=table)))

    def clean_broker_data(
        self, request: CleanControllerBrokerDataRequestHeader, liveness: BrokerLiveness
    ) -> ControllerResult[None]:
        """CLEAN_BROKER_DATA (1011), controller.md 4.8."""
        name = request.broker_name
        invalid = ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        ids_text = request.broker_controller_ids_to_clean
        blank = ids_text is None or not ids_text.strip()
        ids: frozenset[int] | None = None
        if not request.is_clean_living_broker:
            info = self.sync_state_set_info_table.get(name)
            if blank and info is not None and info.master_broker_id is not None:
                return _fail(invalid, f"Broker {name} is still alive, clean up failure")
            if not blank and ids_text is not None:
                try:
                    ids = parse_java_long_set(ids_text)
                except ValueError as e:
                    return _fail(
                        invalid,
                        "Please set the option <brokerControllerIdsToClean> according to the "
                        f"format, exception: {e}",
                    )
                # Stricter than upstream: without -c the request's cluster name is null and no
                # heartbeat matches, so upstream would clean a living broker; use the set's own.
                cluster = request.cluster_name or self._cluster_of(name)
                for broker_id in sorted(ids):
                    if liveness.is_alive(cluster, name, broker_id):
                        return _fail(
                            invalid,
                            f"Broker [{name},  {broker_id}] is still alive, clean up failure",
                        )
        elif not blank and ids_text is not None:
            # Stricter than upstream, which ignores the id list when cleaning living brokers
            # and so removes the whole broker-set; we remove only the listed ids.
            try:
                ids = parse_java_long_set(ids_text)
            except ValueError as e:
                return _fail(
                    invalid,
                    "Please set the option <brokerControllerIdsToClean> according to the format, "
                    f"exception: {e}",
                )
        if self.is_contains_broker(name):
            return ControllerResult(
                events=(CleanBrokerDataEvent(broker_name=name, broker_id_set_to_clean=ids),)
            )
        return _fail(invalid, f"Broker {name} is not existed,clean broker data failure.")

    def scan_need_reelect_broker_sets(self, liveness: BrokerLiveness) -> list[str]:
        """Broker-sets whose master is dead while some replica lives (controller.md 7)."""
        out = []
        for name in sorted(self.sync_state_set_info_table):
            info = self.sync_state_set_info_table[name]
            master = info.master_broker_id
            if master is None or liveness.is_alive(info.cluster_name, name, master):
                continue
            replicas = self.replica_info_table.get(name)
            ids = replicas.all_brokers() if replicas else frozenset()
            if any(liveness.is_alive(info.cluster_name, name, b) for b in ids):
                out.append(name)
        return out

    def _cluster_of(self, broker_name: str) -> str:
        replicas = self.replica_info_table.get(broker_name)
        return replicas.cluster_name if replicas is not None else ""

    # ------------------------------------------------------------------------------------------
    # apply (the only mutator)

    def apply(self, event: Event) -> None:
        """Apply one committed event (controller.md section 5); unknown broker-sets ignored."""
        if isinstance(event, AlterSyncStateSetEvent):
            if self.is_contains_broker(event.broker_name):
                info = self.sync_state_set_info_table[event.broker_name]
                info.update_sync_state_set_info(
                    frozenset(BrokerId(i) for i in event.new_sync_state_set)
                )
        elif isinstance(event, ApplyBrokerIdEvent):
            self._apply_broker_id(event)
        elif isinstance(event, ElectMasterEvent):
            self._apply_elect_master(event)
        elif isinstance(event, CleanBrokerDataEvent):
            self._apply_clean(event)
        elif isinstance(event, UpdateBrokerAddressEvent):
            replicas = self.replica_info_table.get(event.broker_name)
            if replicas is not None:
                replicas.update_broker_address(event.broker_id, event.broker_address)
        # ReadEvent: nothing to do

    def apply_all(self, events: Iterable[Event]) -> None:
        """Apply a committed batch in order."""
        for event in events:
            self.apply(event)

    def _apply_broker_id(self, event: ApplyBrokerIdEvent) -> None:
        name = event.broker_name
        if self.is_contains_broker(name):
            replicas = self.replica_info_table[name]
            if not replicas.is_broker_exist(event.new_broker_id):
                replicas.add_broker(
                    event.new_broker_id, event.broker_address, event.register_check_code
                )
            return
        replicas = BrokerReplicaInfo(cluster_name=event.cluster_name, broker_name=name)
        replicas.add_broker(event.new_broker_id, event.broker_address, event.register_check_code)
        self.replica_info_table[name] = replicas
        self.sync_state_set_info_table[name] = SyncStateInfo(
            cluster_name=event.cluster_name, broker_name=name
        )

    def _apply_elect_master(self, event: ElectMasterEvent) -> None:
        if not self.is_contains_broker(event.broker_name):
            return
        info = self.sync_state_set_info_table[event.broker_name]
        if event.new_master_elected and event.new_master_broker_id is not None:
            master = BrokerId(event.new_master_broker_id)
            info.update_master_info(master)
            info.update_sync_state_set_info(frozenset({master}))
        else:
            info.update_master_info(None)  # the SyncStateSet is kept

    def _apply_clean(self, event: CleanBrokerDataEvent) -> None:
        name = event.broker_name
        ids = event.broker_id_set_to_clean
        if not ids:
            self.replica_info_table.pop(name, None)
            self.sync_state_set_info_table.pop(name, None)
            return
        if not self.is_contains_broker(name):
            return
        replicas = self.replica_info_table[name]
        info = self.sync_state_set_info_table[name]
        for broker_id in sorted(ids):
            replicas.remove_broker_id(broker_id)
            info.remove_from_sync_state(BrokerId(broker_id))
        if not replicas.broker_id_info:
            del self.replica_info_table[name]
        if not info.sync_state_set:
            # Upstream quirk kept: an empty SyncStateSet drops the SyncStateInfo, so the set
            # stops "existing" even while replicas remain (controller.md section 5).
            del self.sync_state_set_info_table[name]


def _check_new_set(
    new_set: frozenset[int],
    info: SyncStateInfo,
    replicas: BrokerReplicaInfo,
    liveness: BrokerLiveness,
) -> ControllerResult[AlterSyncStateSetResponseHeader] | None:
    """Checks 6-8 of controller.md 4.5 (known, alive, contains the master)."""
    for replica in sorted(new_set):
        if not replicas.is_broker_exist(replica):
            return _fail(
                ResponseCode.CONTROLLER_INVALID_REPLICAS,
                "Rejecting alter syncStateSet request because the replicas "
                f"{{{replica}}} don't exist",
            )
        if not liveness.is_alive(replicas.cluster_name, replicas.broker_name, replica):
            return _fail(
                ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                f"Rejecting alter syncStateSet request because the replicas {{{replica}}} "
                "don't alive",
            )
    if info.master_broker_id not in new_set:
        return _fail(
            ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            "Rejecting alter syncStateSet request because the newSyncStateSet don't contains "
            f"origin leader {{{info.master_broker_id}}}",
        )
    return None


def _java(value: object) -> str:
    """``String.valueOf`` of a boxed value (``null`` for None)."""
    return "null" if value is None else str(value)
