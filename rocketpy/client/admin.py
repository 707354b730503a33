"""The mqadmin backend: admin requests to NameServers (and brokers), decoded into plain values.

Owns: :class:`AdminClient`, an async ``MQAdminExt``: one RemotingClient, a NameServer address list
tried in order, and one method per admin request with its body decoded. Mirrors
``DefaultMQAdminExtImpl``. Must not: print (``cli/admin.py`` formats the output).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ConnectionClosed, RemoteError, RequestTimeout, RocketPyError
from rocketpy.common.properties import parse_properties, render_properties
from rocketpy.remoting.protocol.body.admin import (
    ConsumeStatsReply,
    decode_consume_stats,
    decode_kv_table,
    decode_reset_offset_body,
    decode_topic_stats,
)
from rocketpy.remoting.protocol.body.broker import MessageQueue, TopicOffset
from rocketpy.remoting.protocol.body.config_shapes import (
    SubscriptionGroupConfig,
    TopicConfig,
    TopicFilterType,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import to_ext
from rocketpy.remoting.protocol.headers.broker import (
    CreateTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    PullMessageRequestHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    ViewMessageRequestHeader,
)
from rocketpy.remoting.protocol.headers.namesrv import (
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    KvConfigRequestHeader,
)
from rocketpy.remoting.transport.client import RemotingClient

TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"  # MixAll.TOOLS_CONSUMER_GROUP
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG
_PULL_FLAG_SUBSCRIPTION: Final = 0x4  # PullSysFlag.FLAG_SUBSCRIPTION


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker-set as ClusterInfo and TopicRouteData describe it."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO, decoded."""

    brokers: dict[str, BrokerInfo]
    clusters: dict[str, list[str]]


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """One QueueData of a route."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """GET_ROUTEINFO_BY_TOPIC, decoded; ``raw`` keeps the JSON for ``topicRoute`` printing."""

    queues: list[QueueInfo]
    brokers: list[BrokerInfo]
    raw: dict[str, Any] = field(default_factory=dict)


NO_CLUSTER: Final = (
    "Make sure the specified clusterName exists or the name server connected to is correct."
)


class AdminError(RocketPyError):
    """An admin operation that cannot be made as asked (no such cluster, no route)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicSpec:
    """What ``updateTopic`` sends (``TopicConfig``; upstream defaults 8/8/RW)."""

    topic: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = 6
    topic_sys_flag: int = 0
    order: bool = False
    attributes: str | None = None


@dataclass(frozen=True, slots=True)
class EpochRange:
    """One ``EpochEntry`` of an ``EpochEntryCache`` body."""

    epoch: int
    start_offset: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class BrokerEpochCache:
    """GET_BROKER_EPOCH_CACHE (1007), decoded (``EpochEntryCache``)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    epochs: list[EpochRange]
    max_offset: int


def decode_epoch_entry_cache(body: bytes) -> BrokerEpochCache:
    """The ``EpochEntryCache`` JSON body."""
    obj = fastjson.loads(body or b"{}")
    epochs = [
        EpochRange(int(e.get("epoch", 0)), int(e.get("startOffset", 0)), int(e.get("endOffset", 0)))
        for e in obj.get("epochList") or []
    ]
    return BrokerEpochCache(
        str(obj.get("clusterName", "")),
        str(obj.get("brokerName", "")),
        int(obj.get("brokerId", 0)),
        epochs,
        int(obj.get("maxOffset", 0)),
    )


def _broker(obj: dict[str, Any]) -> BrokerInfo:
    addrs = {int(k): str(v) for k, v in (obj.get("brokerAddrs") or {}).items()}
    return BrokerInfo(str(obj.get("cluster", "")), str(obj.get("brokerName", "")), addrs)


def parse_route(body: bytes) -> TopicRoute:
    """Decode a TopicRouteData body in either of Java's encodings."""
    obj = fastjson.loads(body)
    queues = [
        QueueInfo(
            str(q["brokerName"]),
            int(q.get("readQueueNums", 0)),
            int(q.get("writeQueueNums", 0)),
            int(q.get("perm", 0)),
            int(q.get("topicSysFlag", 0) or 0),
        )
        for q in obj.get("queueDatas", [])
    ]
    return TopicRoute(queues, [_broker(b) for b in obj.get("brokerDatas", [])], obj)


def split_namesrv_addr(namesrv_addr: str) -> list[str]:
    """The addresses of a ``namesrvAddr`` (``a:9876;b:9876``), blanks dropped."""
    return [a.strip() for a in namesrv_addr.split(";") if a.strip()]


class AdminClient:
    """Admin requests against a NameServer address list (``a:9876;b:9876``)."""

    def __init__(self, namesrv_addr: str, *, timeout_s: float = 5.0) -> None:
        self._namesrvs = split_namesrv_addr(namesrv_addr)
        if not self._namesrvs:
            raise ValueError("no name server address given (-n or NAMESRV_ADDR)")
        self._timeout_s = timeout_s
        self._remoting = RemotingClient(name="mqadmin")

    async def close(self) -> None:
        """Close every connection."""
        await self._remoting.close()

    async def _namesrv(
        self, request_code: int, ext: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        last: Exception | None = None
        for addr in self._namesrvs:
            try:
                request = RemotingCommand.request(request_code, ext, body)
                return await self._remoting.invoke(addr, request, self._timeout_s)
            except (ConnectionClosed, RequestTimeout) as e:
                last = e
        raise ConnectionClosed(f"no name server answered: {last}") from last

    async def _ok(
        self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        resp = await self._namesrv(code, ext, body)
        if resp.code != ResponseCode.SUCCESS:
            raise RemoteError.for_code(resp.code, resp.remark or "")
        return resp

    async def _all_namesrvs(self, code: int, body: bytes | None = None) -> None:
        for addr in self._namesrvs:
            resp = await self._remoting.invoke(
                addr, RemotingCommand.request(code, None, body), self._timeout_s
            )
            if resp.code != ResponseCode.SUCCESS:
                raise RemoteError.for_code(resp.code, resp.remark or "")

    async def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (106)."""
        obj = fastjson.loads((await self._ok(RequestCode.GET_BROKER_CLUSTER_INFO)).body or b"{}")
        brokers = {n: _broker(b) for n, b in (obj.get("brokerAddrTable") or {}).items()}
        clusters = {c: list(ns) for c, ns in (obj.get("clusterAddrTable") or {}).items()}
        return ClusterInfo(brokers, clusters)

    async def topic_route(self, topic: str) -> TopicRoute:
        """GET_ROUTEINFO_BY_TOPIC (105)."""
        ext = to_ext(GetRouteInfoRequestHeader(topic=topic))
        resp = await self._ok(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
        return parse_route(resp.body or b"{}")

    async def topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206)."""
        resp = await self._ok(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return [str(t) for t in fastjson.loads(resp.body or b"{}").get("topicList", [])]

    async def namesrv_config(self) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG (319) of every NameServer."""
        out = {}
        for addr in self._namesrvs:
            request = RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG)
            resp = await self._remoting.invoke(addr, request, self._timeout_s)
            if resp.code != ResponseCode.SUCCESS:
                raise RemoteError.for_code(resp.code, resp.remark or "")
            out[addr] = parse_properties((resp.body or b"").decode("utf-8"))
        return out

    async def update_namesrv_config(self, values: dict[str, str]) -> None:
        """UPDATE_NAMESRV_CONFIG (318) on every NameServer."""
        body = render_properties(values).encode("utf-8")
        await self._all_namesrvs(RequestCode.UPDATE_NAMESRV_CONFIG, body)

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG (100) on every NameServer."""
        ext = to_ext(KvConfigRequestHeader(namespace=namespace, key=key, value=value))
        for addr in self._namesrvs:
            resp = await self._remoting.invoke(
                addr, RemotingCommand.request(RequestCode.PUT_KV_CONFIG, ext), self._timeout_s
            )
            if resp.code != ResponseCode.SUCCESS:
                raise RemoteError.for_code(resp.code, resp.remark or "")

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG (102) on every NameServer."""
        ext = to_ext(KvConfigRequestHeader(namespace=namespace, key=key))
        for addr in self._namesrvs:
            resp = await self._remoting.invoke(
                addr, RemotingCommand.request(RequestCode.DELETE_KV_CONFIG, ext), self._timeout_s
            )
            if resp.code != ResponseCode.SUCCESS:
                raise RemoteError.for_code(resp.code, resp.remark or "")

    async def broker_runtime_stats(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO (28): the broker's KVTable of runtime figures."""
        resp = await self._broker(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return decode_kv_table(resp.body or b'{"table":{}}')

    async def delete_topic_in_namesrv(self, topic: str, cluster: str) -> None:
        """DELETE_TOPIC_IN_NAMESRV (216) on every NameServer."""
        ext = to_ext(DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster))
        for addr in self._namesrvs:
            request = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)
            resp = await self._remoting.invoke(addr, request, self._timeout_s)
            if resp.code != ResponseCode.SUCCESS:
                raise RemoteError.for_code(resp.code, resp.remark or "")

    # -- address look-ups (CommandUtil) ------------------------------------------------------

    async def cluster_brokers(self, cluster: str) -> list[BrokerInfo]:
        """The broker-sets of ``cluster``, by name.

        Raises:
            AdminError: the NameServers do not know the cluster.
        """
        info = await self.cluster_info()
        names = info.clusters.get(cluster)
        if names is None:
            raise AdminError(f"cluster {cluster!r} not found. {NO_CLUSTER}")
        return [info.brokers[n] for n in sorted(names) if n in info.brokers]

    async def master_addrs(self, cluster: str) -> list[str]:
        """``fetchMasterAddrByClusterName``: the id-0 address of each broker-set."""
        return [
            b.broker_addrs[0] for b in await self.cluster_brokers(cluster) if 0 in b.broker_addrs
        ]

    async def all_addrs(self, cluster: str) -> list[str]:
        """``fetchMasterAndSlaveAddrByClusterName``: every address, masters first per set."""
        out: list[str] = []
        for broker in await self.cluster_brokers(cluster):
            out.extend(addr for _, addr in sorted(broker.broker_addrs.items()))
        return out

    async def broker_set_addrs(self, broker_name: str) -> list[str]:
        """``fetchMasterAndSlaveAddrByBrokerName``: every address of one broker-set, by id.

        Raises:
            AdminError: the NameServers do not know the broker name.
        """
        broker = (await self.cluster_info()).brokers.get(broker_name)
        if broker is None:
            raise AdminError(f"broker {broker_name!r} not found. {NO_CLUSTER}")
        return [addr for _, addr in sorted(broker.broker_addrs.items())]

    async def route_brokers(self, topic: str) -> list[tuple[str, str]]:
        """(brokerName, address) per broker-set of the topic's route, the master's address when
        there is one (``BrokerData.selectBrokerAddr``)."""
        route = await self.topic_route(topic)
        out = []
        for broker in sorted(route.brokers, key=lambda b: b.broker_name):
            if broker.broker_addrs:
                bid = 0 if 0 in broker.broker_addrs else min(broker.broker_addrs)
                out.append((broker.broker_name, broker.broker_addrs[bid]))
        return out

    # -- brokers (DefaultMQAdminExtImpl / MQClientAPIImpl) ----------------------------------

    async def _broker(
        self,
        addr: str,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        request = RemotingCommand.request(code, ext, body)
        resp = await self._remoting.invoke(addr, request, self._timeout_s)
        if resp.code not in ok:
            raise RemoteError.for_code(resp.code, f"{resp.remark or ''} (broker {addr})")
        return resp

    async def create_topic(self, addr: str, config: TopicSpec) -> None:
        """UPDATE_AND_CREATE_TOPIC (17)."""
        header = CreateTopicRequestHeader(
            topic=config.topic,
            default_topic="TBW102",  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            perm=config.perm,
            topic_filter_type=TopicFilterType.SINGLE_TAG.value,
            topic_sys_flag=config.topic_sys_flag,
            order=config.order,
            attributes=config.attributes or None,
        )
        await self._broker(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, to_ext(header))

    async def topic_config(self, addr: str, topic: str) -> TopicConfig:
        """GET_TOPIC_CONFIG (351), ``examineTopicConfig``: the broker's config of ``topic``
        (``TopicConfigAndQueueMapping``; rocketpy has no static-topic mapping).

        Raises:
            RemoteError: TOPIC_NOT_EXIST when the broker does not have the topic.
        """
        ext = to_ext(TopicRequestHeader(topic=topic))
        resp = await self._broker(addr, RequestCode.GET_TOPIC_CONFIG, ext)
        return TopicConfig.from_json_value(fastjson.loads(resp.body or b"{}"), name=topic)

    async def subscription_group_config(self, addr: str, group: str) -> SubscriptionGroupConfig:
        """GET_SUBSCRIPTIONGROUP_CONFIG (352), ``MQClientAPIImpl.getSubscriptionGroupConfig``.

        Raises:
            RemoteError: SUBSCRIPTION_GROUP_NOT_EXIST when the broker neither has the group nor
                may auto-create it.
        """
        ext = to_ext(GetSubscriptionGroupConfigRequestHeader(group=group))
        resp = await self._broker(addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, ext)
        return SubscriptionGroupConfig.from_json_value(
            fastjson.loads(resp.body or b"{}"), name=group
        )

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER (215)."""
        ext = to_ext(TopicRequestHeader(topic=topic))
        await self._broker(addr, RequestCode.DELETE_TOPIC_IN_BROKER, ext)

    async def topic_stats(
        self, addr: str, topic: str
    ) -> tuple[dict[MessageQueue, TopicOffset], float]:
        """GET_TOPIC_STATS_INFO (202): per queue offsets and the topic's put TPS."""
        ext = to_ext(TopicRequestHeader(topic=topic))
        resp = await self._broker(addr, RequestCode.GET_TOPIC_STATS_INFO, ext)
        return decode_topic_stats(resp.body)

    async def consume_stats(self, addr: str, group: str, topic: str | None) -> ConsumeStatsReply:
        """GET_CONSUME_STATS (208), for one topic or every topic the group has offsets in."""
        ext = to_ext(GetConsumeStatsRequestHeader(consumer_group=group, topic=topic or None))
        resp = await self._broker(addr, RequestCode.GET_CONSUME_STATS, ext)
        return decode_consume_stats(resp.body)

    async def broker_stats_data(
        self, addr: str, stats_name: str, stats_key: str
    ) -> dict[str, dict[str, float]] | None:
        """VIEW_BROKER_STATS_DATA (315): ``{statsMinute|statsHour|statsDay: {sum, tps}}``;
        None when the broker never counted that item (it answers SYSTEM_ERROR)."""
        ext = to_ext(ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key))
        resp = await self._broker(
            addr, RequestCode.VIEW_BROKER_STATS_DATA, ext,
            ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
        )  # fmt: skip
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            return None
        data: dict[str, dict[str, float]] = fastjson.loads(resp.body)
        return data

    async def topic_consume_by_who(self, addr: str, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO (300): the groups consuming ``topic`` on that broker."""
        ext = to_ext(TopicRequestHeader(topic=topic))
        resp = await self._broker(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, ext)
        body = fastjson.loads(resp.body) if resp.body else {}
        return [str(g) for g in body.get("groupList", [])]

    async def create_subscription_group(self, addr: str, group: dict[str, Any]) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200); ``group`` is the SubscriptionGroupConfig
        JSON object."""
        body = fastjson.dumps(group).encode("utf-8")
        await self._broker(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)

    async def reset_offset(
        self,
        addr: str,
        topic: str,
        group: str,
        timestamp: int,
        *,
        queue_id: int | None = None,
        offset: int | None = None,
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET (222), forced, by time or to one queue's offset."""
        header = ResetOffsetRequestHeader(
            topic=topic,
            group=group,
            timestamp=timestamp,
            is_force=True,
            queue_id=queue_id,
            offset=offset,
        )
        resp = await self._broker(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, to_ext(header))
        return decode_reset_offset_body(resp.body) if resp.body else {}

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (29)."""
        ext = to_ext(SearchOffsetRequestHeader(topic=topic, queue_id=queue_id, timestamp=timestamp))
        resp = await self._broker(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext)
        return int(resp.ext("offset") or 0)

    async def view_message(self, addr: str, commit_log_offset: int) -> bytes:
        """VIEW_MESSAGE_BY_ID (33): the raw stored record."""
        header = ViewMessageRequestHeader(offset=commit_log_offset)
        resp = await self._broker(addr, RequestCode.VIEW_MESSAGE_BY_ID, to_ext(header))
        return resp.body or b""

    async def query_message(
        self, addr: str, topic: str, key: str, *, max_num: int, begin: int, end: int, unique: bool
    ) -> bytes:
        """QUERY_MESSAGE (12) through the broker's index: the raw records (empty if none)."""
        header = QueryMessageRequestHeader(
            topic=topic, key=key, max_num=max_num, begin_timestamp=begin, end_timestamp=end
        )
        ext = to_ext(header)
        if unique:  # not a header field: upstream adds it with addExtField
            ext[UNIQUE_KEY_QUERY] = "true"
        ok = (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND)
        resp = await self._broker(addr, RequestCode.QUERY_MESSAGE, ext, ok=ok)
        return (resp.body or b"") if resp.code == ResponseCode.SUCCESS else b""

    async def pull_one(self, addr: str, broker_name: str, mq: MessageQueue, offset: int) -> bytes:
        """PULL_MESSAGE (11) of one record as ``DefaultMQPullConsumer.pull(mq, "*", offset, 1)``
        does (group TOOLS_CONSUMER, subscription in the request); empty when none is there."""
        header = PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER_GROUP,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=1,
            sys_flag=_PULL_FLAG_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
            subscription="*",
            expression_type="TAG",
            bname=broker_name,
        )
        ok = (
            ResponseCode.SUCCESS,
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED,
        )
        resp = await self._broker(addr, RequestCode.PULL_MESSAGE, to_ext(header), ok=ok)
        return (resp.body or b"") if resp.code == ResponseCode.SUCCESS else b""

    async def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG (26): the broker's ``.properties``, in its order."""
        resp = await self._broker(addr, RequestCode.GET_BROKER_CONFIG)
        return parse_properties((resp.body or b"").decode("utf-8"))

    async def update_broker_config(self, addr: str, values: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG (25)."""
        body = render_properties(values).encode("utf-8")
        await self._broker(addr, RequestCode.UPDATE_BROKER_CONFIG, None, body)

    async def broker_epoch_cache(self, addr: str) -> BrokerEpochCache:
        """GET_BROKER_EPOCH_CACHE (1007): the broker's epoch entries and max offset.

        Raises:
            RemoteError: e.g. REQUEST_CODE_NOT_SUPPORTED from a broker not in controller mode.
        """
        resp = await self._broker(addr, RequestCode.GET_BROKER_EPOCH_CACHE)
        return decode_epoch_entry_cache(resp.body or b"")
