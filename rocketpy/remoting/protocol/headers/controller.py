"""Typed custom headers of the controller requests (codes 1001-1013), BROKER_HEARTBEAT (904) and
NOTIFY_BROKER_ROLE_CHANGED (1008), 5.1.1+ field names.

Owns: one dataclass per upstream header class; the extFields keys are the Java field names
(codes.md section 3, controller.md section 4). Must not: validate semantics (that is
``controller.state``). Mirrors ``remoting/.../protocol/header/controller/**``,
``header/namesrv/BrokerHeartbeatRequestHeader`` and ``header/NotifyBrokerRoleChangedRequestHeader``.

Mandatory (no default) are the ``@CFNotNull`` fields and the fields the controller cannot work
without (upstream would fail later with SYSTEM_ERROR; we name the field instead). Java boxed
response fields are ``None`` when unset and then absent from extFields; Java primitives
(``newSyncStateSetEpoch``, ``isLeader``, ``isCleanLivingBroker``, ``invokeTime``) always travel.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketpy.remoting.protocol.headers.base import wire

#: ``ElectMasterRequestHeader.brokerId`` of a controller-triggered election.
CONTROLLER_TRIGGER_BROKER_ID = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterSyncStateSetRequestHeader:
    """1001 CONTROLLER_ALTER_SYNC_STATE_SET; body ``SyncStateSet{newSet, current epoch}``."""

    broker_name: str = wire("brokerName")
    master_broker_id: int = wire("masterBrokerId")
    master_epoch: int = wire("masterEpoch")


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterSyncStateSetResponseHeader:
    """1001 response (``int newSyncStateSetEpoch``, a primitive: always present)."""

    new_sync_state_set_epoch: int = wire("newSyncStateSetEpoch", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectMasterRequestHeader:
    """1002 CONTROLLER_ELECT_MASTER (broker, controller or admin trigger)."""

    cluster_name: str = wire("clusterName")
    broker_name: str = wire("brokerName")
    broker_id: int = wire("brokerId")
    designate_elect: bool = wire("designateElect")
    invoke_time: int | None = wire("invokeTime", default=None)

    @classmethod
    def of_broker_trigger(
        cls, cluster_name: str, broker_name: str, broker_id: int
    ) -> ElectMasterRequestHeader:
        """A broker asking to be elected (``ofBrokerTrigger``)."""
        return cls(
            cluster_name=cluster_name,
            broker_name=broker_name,
            broker_id=broker_id,
            designate_elect=False,
        )

    @classmethod
    def of_controller_trigger(cls, broker_name: str) -> ElectMasterRequestHeader:
        """The controller re-electing after a master died (``ofControllerTrigger``)."""
        return cls(
            cluster_name="",
            broker_name=broker_name,
            broker_id=CONTROLLER_TRIGGER_BROKER_ID,
            designate_elect=False,
        )

    @classmethod
    def of_admin_trigger(
        cls, cluster_name: str, broker_name: str, broker_id: int
    ) -> ElectMasterRequestHeader:
        """``mqadmin electMaster``: elect exactly ``broker_id`` (``ofAdminTrigger``)."""
        return cls(
            cluster_name=cluster_name,
            broker_name=broker_name,
            broker_id=broker_id,
            designate_elect=True,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectMasterResponseHeader:
    """1002 response; body ``ElectMasterResponseBody``."""

    master_broker_id: int | None = wire("masterBrokerId", default=None)
    master_address: str | None = wire("masterAddress", default=None)
    master_epoch: int | None = wire("masterEpoch", default=None)
    sync_state_set_epoch: int | None = wire("syncStateSetEpoch", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerToControllerRequestHeader:
    """1003 CONTROLLER_REGISTER_BROKER (5.1.1+ ``registerBrokerToController``)."""

    cluster_name: str = wire("clusterName")
    broker_name: str = wire("brokerName")
    broker_id: int = wire("brokerId")
    broker_address: str = wire("brokerAddress")
    invoke_time: int = wire("invokeTime", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerToControllerResponseHeader:
    """1003 response; master fields only when a master exists and is alive."""

    cluster_name: str | None = wire("clusterName", default=None)
    broker_name: str | None = wire("brokerName", default=None)
    master_broker_id: int | None = wire("masterBrokerId", default=None)
    master_address: str | None = wire("masterAddress", default=None)
    master_epoch: int | None = wire("masterEpoch", default=None)
    sync_state_set_epoch: int | None = wire("syncStateSetEpoch", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class GetReplicaInfoRequestHeader:
    """1004 CONTROLLER_GET_REPLICA_INFO."""

    broker_name: str = wire("brokerName")


@dataclass(frozen=True, slots=True, kw_only=True)
class GetReplicaInfoResponseHeader:
    """1004 response; body ``SyncStateSet``."""

    master_broker_id: int | None = wire("masterBrokerId", default=None)
    master_address: str | None = wire("masterAddress", default=None)
    master_epoch: int | None = wire("masterEpoch", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMetaDataResponseHeader:
    """1005 CONTROLLER_GET_METADATA_INFO response; ``peers`` = ``id:addr;`` repeated."""

    group: str | None = wire("group", default=None)
    controller_leader_id: str | None = wire("controllerLeaderId", default=None)
    controller_leader_address: str | None = wire("controllerLeaderAddress", default=None)
    is_leader: bool = wire("isLeader", default=False)
    peers: str | None = wire("peers", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanControllerBrokerDataRequestHeader:
    """1011 CLEAN_BROKER_DATA; ``brokerControllerIdsToClean`` is ``"1;2;3"``."""

    cluster_name: str | None = wire("clusterName", default=None)
    broker_name: str = wire("brokerName")
    broker_controller_ids_to_clean: str | None = wire("brokerControllerIdsToClean", default=None)
    is_clean_living_broker: bool = wire("isCleanLivingBroker", default=False)
    invoke_time: int = wire("invokeTime", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class GetNextBrokerIdRequestHeader:
    """1012 CONTROLLER_GET_NEXT_BROKER_ID."""

    cluster_name: str = wire("clusterName")
    broker_name: str = wire("brokerName")


@dataclass(frozen=True, slots=True, kw_only=True)
class GetNextBrokerIdResponseHeader:
    """1012 response."""

    cluster_name: str | None = wire("clusterName", default=None)
    broker_name: str | None = wire("brokerName", default=None)
    next_broker_id: int | None = wire("nextBrokerId", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyBrokerIdRequestHeader:
    """1013 CONTROLLER_APPLY_BROKER_ID; ``registerCheckCode`` = ``<brokerAddr>;<millis>``."""

    cluster_name: str = wire("clusterName")
    broker_name: str = wire("brokerName")
    applied_broker_id: int = wire("appliedBrokerId")
    register_check_code: str = wire("registerCheckCode")


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyBrokerIdResponseHeader:
    """1013 response."""

    cluster_name: str | None = wire("clusterName", default=None)
    broker_name: str | None = wire("brokerName", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeatRequestHeader:
    """904 BROKER_HEARTBEAT (oneway; note upstream's spelling ``heartbeatTimeoutMills``)."""

    cluster_name: str = wire("clusterName")
    broker_addr: str = wire("brokerAddr")
    broker_name: str = wire("brokerName")
    broker_id: int | None = wire("brokerId", default=None)
    epoch: int | None = wire("epoch", default=None)
    max_offset: int | None = wire("maxOffset", default=None)
    confirm_offset: int | None = wire("confirmOffset", default=None)
    heartbeat_timeout_mills: int | None = wire("heartbeatTimeoutMills", default=None)
    election_priority: int | None = wire("electionPriority", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifyBrokerRoleChangedRequestHeader:
    """1008 NOTIFY_BROKER_ROLE_CHANGED (controller -> broker, oneway), 5.1.1+ fields."""

    master_address: str | None = wire("masterAddress", default=None)
    master_epoch: int | None = wire("masterEpoch", default=None)
    sync_state_set_epoch: int | None = wire("syncStateSetEpoch", default=None)
    master_broker_id: int | None = wire("masterBrokerId", default=None)
