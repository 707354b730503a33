"""Typed custom headers of the NameServer request codes (codes.md section 1).

Owns: one dataclass per header, with upstream's extFields names. Conversion: ``headers.base``.
BROKER_HEARTBEAT (904) is shared with the controller and lives in ``headers.controller``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketpy.remoting.protocol.headers.base import wire


@dataclass(frozen=True, slots=True, kw_only=True)
class KvConfigRequestHeader:
    """PUT_KV_CONFIG (100), GET_KV_CONFIG (101), DELETE_KV_CONFIG (102)."""

    namespace: str = wire("namespace")
    key: str = wire("key")
    value: str | None = wire("value", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceRequestHeader:
    """GET_KVLIST_BY_NAMESPACE (219)."""

    namespace: str = wire("namespace")


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRequestHeader:
    """REGISTER_BROKER (103)."""

    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    ha_server_addr: str = wire("haServerAddr")
    broker_id: int = wire("brokerId")
    heartbeat_timeout_millis: int | None = wire("heartbeatTimeoutMillis", default=None)
    enable_acting_master: bool | None = wire("enableActingMaster", default=None)
    compressed: bool = wire("compressed", default=False)
    body_crc32: int = wire("bodyCrc32", default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerResponseHeader:
    """REGISTER_BROKER response."""

    ha_server_addr: str | None = wire("haServerAddr", default=None)
    master_addr: str | None = wire("masterAddr", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnRegisterBrokerRequestHeader:
    """UNREGISTER_BROKER (104)."""

    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    broker_id: int = wire("brokerId")


@dataclass(frozen=True, slots=True, kw_only=True)
class GetRouteInfoRequestHeader:
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str = wire("topic")
    accept_standard_json_only: bool | None = wire("acceptStandardJsonOnly", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerNameRequestHeader:
    """WIPE_WRITE_PERM_OF_BROKER (205), ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str = wire("brokerName")


@dataclass(frozen=True, slots=True, kw_only=True)
class WipeWritePermResponseHeader:
    """WIPE_WRITE_PERM_OF_BROKER response."""

    wipe_topic_count: int = wire("wipeTopicCount")


@dataclass(frozen=True, slots=True, kw_only=True)
class AddWritePermResponseHeader:
    """ADD_WRITE_PERM_OF_BROKER response."""

    add_topic_count: int = wire("addTopicCount")


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicFromNamesrvRequestHeader:
    """DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str = wire("topic")
    cluster_name: str | None = wire("clusterName", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRequestHeader:
    """REGISTER_TOPIC_IN_NAMESRV (217)."""

    topic: str = wire("topic")


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTopicsByClusterRequestHeader:
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str = wire("cluster")


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryDataVersionRequestHeader:
    """QUERY_DATA_VERSION (322)."""

    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    broker_id: int = wire("brokerId")


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryDataVersionResponseHeader:
    """QUERY_DATA_VERSION response."""

    changed: bool = wire("changed")


@dataclass(frozen=True, slots=True, kw_only=True)
class GetBrokerMemberGroupRequestHeader:
    """GET_BROKER_MEMBER_GROUP (901)."""

    cluster_name: str = wire("clusterName")
    broker_name: str = wire("brokerName")


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifyMinBrokerIdChangeRequestHeader:
    """NOTIFY_MIN_BROKER_ID_CHANGE (905), NameServer -> broker, oneway."""

    min_broker_id: int | None = wire("minBrokerId", default=None)
    broker_name: str | None = wire("brokerName", default=None)
    min_broker_addr: str | None = wire("minBrokerAddr", default=None)
    offline_broker_addr: str | None = wire("offlineBrokerAddr", default=None)
    ha_broker_addr: str | None = wire("haBrokerAddr", default=None)
