"""The mqadmin backend: admin requests to NameServers, brokers and controllers, decoded.

Owns: :class:`AdminClient`, an async ``MQAdminExt``: one RemotingClient, a NameServer address list
tried in order, and one method per admin request with its body decoded; and
:class:`ControllerAdminClient` for the controller commands. Mirrors
``DefaultMQAdminExtImpl``. Must not: print (``cli/admin.py`` formats the output).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ConnectionClosed, RemoteError, RequestTimeout
from rocketpy.common.properties import parse_properties, render_properties
from rocketpy.remoting.protocol.bodies.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    decode_broker_replicas_info,
    decode_elect_master_body,
    encode_broker_names,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.controller import (
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
)
from rocketpy.remoting.transport.client import RemotingClient


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


class AdminClient:
    """Admin requests against a NameServer address list (``a:9876;b:9876``)."""

    def __init__(self, namesrv_addr: str, *, timeout_s: float = 5.0) -> None:
        self._namesrvs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
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
        resp = await self._ok(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
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
        for addr in self._namesrvs:
            ext = {"namespace": namespace, "key": key, "value": value}
            resp = await self._remoting.invoke(
                addr, RemotingCommand.request(RequestCode.PUT_KV_CONFIG, ext), self._timeout_s
            )
            if resp.code != ResponseCode.SUCCESS:
                raise RemoteError.for_code(resp.code, resp.remark or "")

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG (102) on every NameServer."""
        for addr in self._namesrvs:
            ext = {"namespace": namespace, "key": key}
            resp = await self._remoting.invoke(
                addr, RemotingCommand.request(RequestCode.DELETE_KV_CONFIG, ext), self._timeout_s
            )
            if resp.code != ResponseCode.SUCCESS:
                raise RemoteError.for_code(resp.code, resp.remark or "")

    async def broker_runtime_stats(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO (28): the broker's KVTable of runtime figures."""
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        resp = await self._remoting.invoke(broker_addr, request, self._timeout_s)
        if resp.code != ResponseCode.SUCCESS:
            raise RemoteError.for_code(resp.code, resp.remark or "")
        table = fastjson.loads(resp.body or b"{}").get("table") or {}
        return {str(k): str(v) for k, v in table.items()}


class ControllerAdminClient:
    """Admin requests to controllers: metadata from the named one, the rest via its leader.

    Mirrors ``MQClientAPIImpl.getControllerMetaData`` / ``electMaster`` /
    ``getInSyncStateData`` / ``cleanControllerBrokerData`` / ``get|updateControllerConfig``.
    """

    def __init__(self, *, timeout_s: float = 3.0) -> None:
        self._timeout_s = timeout_s
        self._remoting = RemotingClient(name="mqadmin-controller")

    async def close(self) -> None:
        """Close every connection."""
        await self._remoting.close()

    async def _ok(
        self, addr: str, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        resp = await self._remoting.invoke(
            addr, RemotingCommand.request(code, ext, body), self._timeout_s
        )
        if resp.code != ResponseCode.SUCCESS:
            raise RemoteError.for_code(resp.code, resp.remark or "")
        return resp

    async def metadata(self, controller: str) -> GetMetaDataResponseHeader:
        """CONTROLLER_GET_METADATA_INFO (1005) of ``controller``."""
        resp = await self._ok(controller, RequestCode.CONTROLLER_GET_METADATA_INFO)
        return from_ext(GetMetaDataResponseHeader, resp.ext_fields)

    async def _leader(self, controller: str) -> str:
        leader = (await self.metadata(controller)).controller_leader_address
        if not leader:
            raise RemoteError(ResponseCode.CONTROLLER_NOT_LEADER, "no controller leader known")
        return leader

    async def elect_master(
        self, controller: str, cluster: str, broker_name: str, broker_id: int
    ) -> tuple[ElectMasterResponseHeader, BrokerMemberGroup | None]:
        """CONTROLLER_ELECT_MASTER (1002), admin trigger, on the leader."""
        hdr = ElectMasterRequestHeader.of_admin_trigger(cluster, broker_name, broker_id)
        resp = await self._ok(
            await self._leader(controller), RequestCode.CONTROLLER_ELECT_MASTER, to_ext(hdr)
        )
        group = decode_elect_master_body(resp.body).broker_member_group if resp.body else None
        return from_ext(ElectMasterResponseHeader, resp.ext_fields), group

    async def sync_state_data(self, controller: str, broker_names: list[str]) -> BrokerReplicasInfo:
        """CONTROLLER_GET_SYNC_STATE_DATA (1006) on the leader."""
        resp = await self._ok(
            await self._leader(controller),
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
            body=encode_broker_names(broker_names),
        )
        return decode_broker_replicas_info(resp.body or b"{}")

    async def clean_broker_data(
        self,
        controller: str,
        *,
        cluster: str | None,
        broker_name: str,
        ids_to_clean: str | None,
        clean_living: bool,
    ) -> None:
        """CLEAN_BROKER_DATA (1011) on the leader."""
        hdr = CleanControllerBrokerDataRequestHeader(
            cluster_name=cluster,
            broker_name=broker_name,
            broker_controller_ids_to_clean=ids_to_clean,
            is_clean_living_broker=clean_living,
        )
        await self._ok(await self._leader(controller), RequestCode.CLEAN_BROKER_DATA, to_ext(hdr))

    async def controller_config(self, controllers: list[str]) -> dict[str, dict[str, str]]:
        """GET_CONTROLLER_CONFIG (1010) of every listed controller."""
        out = {}
        for addr in controllers:
            resp = await self._ok(addr, RequestCode.GET_CONTROLLER_CONFIG)
            out[addr] = parse_properties((resp.body or b"").decode("utf-8"))
        return out

    async def update_controller_config(
        self, controllers: list[str], values: dict[str, str]
    ) -> None:
        """UPDATE_CONTROLLER_CONFIG (1009) on every listed controller."""
        body = render_properties(values).encode("utf-8")
        for addr in controllers:
            await self._ok(addr, RequestCode.UPDATE_CONTROLLER_CONFIG, body=body)
