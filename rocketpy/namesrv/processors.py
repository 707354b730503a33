"""Request processors of the NameServer: decode a typed header, call the tables, encode the body.

Owns: the mapping from every NameServer request code to its behaviour (namesrv.md sections 3, 5
and 7). Mirrors ``DefaultRequestProcessor`` and ``ClientRequestProcessor``. Must not: hold state of
its own (the route tables, KV store and settings belong to the service).
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Final

import structlog

from rocketpy.common.clock import Clock
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import CodecError
from rocketpy.namesrv import bodies
from rocketpy.namesrv.config import NamesrvConfig
from rocketpy.namesrv.kv_config import KVConfigManager
from rocketpy.namesrv.route_info import (
    MinIdChange,
    RegisterRejected,
    RegisterRequest,
    RouteInfoManager,
    UnregisterTarget,
)
from rocketpy.remoting.protocol.body.config_shapes import decode_data_version, encode_data_version
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers import namesrv as h
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.controller import BrokerHeartbeatRequestHeader
from rocketpy.remoting.transport.config_requests import config_response, update_config
from rocketpy.remoting.transport.dispatch import Processor, ProcessorRegistry, RequestContext

log = structlog.get_logger(__name__)

ORDER_TOPIC_CONFIG: Final = "ORDER_TOPIC_CONFIG"
FAQ_URL: Final = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
ROUTE_CACHE_MAX: Final = 10_000

Response = RemotingCommand


class DefaultRequestProcessor:
    """Every NameServer request code, bound to one NameServer's state."""

    def __init__(
        self,
        *,
        config: Callable[[], NamesrvConfig],
        update_config: Callable[[dict[str, str]], Awaitable[None]],
        routes: RouteInfoManager,
        kv: KVConfigManager,
        clock: Clock,
        started_ms: int,
        notify_min_id: Callable[[MinIdChange], None],
    ) -> None:
        self._config = config
        self._update_config = update_config
        self._routes = routes
        self._kv = kv
        self._clock = clock
        self._started_ms = started_ms
        self._notify_min_id = notify_min_id
        # (topic, standard, acting master, order conf) -> (table generation, encoded body).
        # Routes change rarely compared with lookups, so the body is encoded once per change.
        self._route_cache: dict[tuple[str, bool, bool, str | None], tuple[int, bytes]] = {}

    def register(self, registry: ProcessorRegistry) -> None:
        """Route every NameServer code to its handler."""
        table: dict[int, Processor] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.GET_BROKER_MEMBER_GROUP: self.get_member_group,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topics,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topics,
            RequestCode.GET_UNIT_TOPIC_LIST: self.get_unit_topics,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_unit_sub_topics,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_unit_sub_ununit_topics,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.REGISTER_TOPIC_IN_NAMESRV: self.register_topic,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_namesrv_config,
        }
        for code, handler in table.items():
            registry.register(code, handler)

    # -- KV config ------------------------------------------------------------------------------

    async def put_kv_config(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """PUT_KV_CONFIG (100)."""
        hdr = from_ext(h.KvConfigRequestHeader, req.ext_fields)
        if hdr.value is None:
            raise CodecError("the custom field <value> is null", field="value")
        await self._kv.put(hdr.namespace, hdr.key, hdr.value)
        return req.make_response()

    async def get_kv_config(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_KV_CONFIG (101): QUERY_NOT_FOUND when absent."""
        hdr = from_ext(h.KvConfigRequestHeader, req.ext_fields)
        value = self._kv.get(hdr.namespace, hdr.key)
        if value is None:
            return req.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {hdr.namespace} Key: {hdr.key}",
            )
        return req.make_response(ext_fields={"value": value})

    async def delete_kv_config(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """DELETE_KV_CONFIG (102)."""
        hdr = from_ext(h.KvConfigRequestHeader, req.ext_fields)
        await self._kv.delete(hdr.namespace, hdr.key)
        return req.make_response()

    async def get_kv_list(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_KVLIST_BY_NAMESPACE (219)."""
        hdr = from_ext(h.NamespaceRequestHeader, req.ext_fields)
        table = self._kv.namespace(hdr.namespace)
        if table is None:
            return req.make_response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {hdr.namespace}"
            )
        return req.make_response(body=bodies.encode_kv_table(table))

    # -- brokers --------------------------------------------------------------------------------

    async def register_broker(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """REGISTER_BROKER (103), namesrv.md section 3."""
        hdr = from_ext(h.RegisterBrokerRequestHeader, req.ext_fields)
        if hdr.body_crc32 != 0 and (zlib.crc32(req.body or b"") & 0x7FFFFFFF) != hdr.body_crc32:
            log.warning("receive registerBroker request, crc32 not match", addr=hdr.broker_addr)
            return req.make_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        wrapper, filters = bodies.decode_register_body(
            req.body, compressed=hdr.compressed, version=req.version
        )
        zone = (req.ext_fields or {}).get("__ZONE_NAME")
        request = RegisterRequest(
            cluster=hdr.cluster_name,
            broker_addr=hdr.broker_addr,
            broker_name=hdr.broker_name,
            broker_id=hdr.broker_id,
            ha_server_addr=hdr.ha_server_addr,
            topic_configs=wrapper.topic_config_table,
            data_version=wrapper.data_version,
            filter_servers=filters,
            zone_name=zone,
            heartbeat_timeout_ms=hdr.heartbeat_timeout_millis,
            enable_acting_master=bool(hdr.enable_acting_master),
        )
        try:
            result = self._routes.register_broker(request, ctx.channel, self._clock.monotonic_ms())
        except RegisterRejected:
            return req.make_response(ResponseCode.SYSTEM_ERROR, "register broker failed")
        log.info(
            "new broker registered",
            cluster=hdr.cluster_name,
            broker=hdr.broker_name,
            id=hdr.broker_id,
            addr=hdr.broker_addr,
            ha=hdr.ha_server_addr,
        )
        if result.min_id_change is not None:
            self._notify_min_id(result.min_id_change)
        body = None
        order = self._kv.namespace(ORDER_TOPIC_CONFIG)
        if self._config().return_order_topic_config_to_broker and order is not None:
            body = bodies.encode_kv_table(order)
        ext = to_ext(
            h.RegisterBrokerResponseHeader(
                ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
            )
        )
        return req.make_response(ext_fields=ext, body=body)

    async def unregister_broker(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """UNREGISTER_BROKER (104)."""
        hdr = from_ext(h.UnRegisterBrokerRequestHeader, req.ext_fields)
        target = UnregisterTarget(hdr.cluster_name, hdr.broker_addr, hdr.broker_name, hdr.broker_id)
        change = self._routes.unregister_broker(target)
        log.info("unregisterBroker", broker=hdr.broker_name, addr=hdr.broker_addr, id=hdr.broker_id)
        if change is not None:
            self._notify_min_id(change)
        return req.make_response()

    async def query_data_version(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """QUERY_DATA_VERSION (322): changed?, refreshes liveness, returns the stored version."""
        hdr = from_ext(h.QueryDataVersionRequestHeader, req.ext_fields)
        theirs = decode_data_version(req.body or b"{}")
        ours = self._routes.data_version_of(hdr.cluster_name, hdr.broker_addr)
        self._routes.update_live(hdr.cluster_name, hdr.broker_addr, self._clock.monotonic_ms())
        ext = to_ext(h.QueryDataVersionResponseHeader(changed=ours is None or ours != theirs))
        body = None if ours is None else encode_data_version(ours)
        return req.make_response(ext_fields=ext, body=body)

    async def broker_heartbeat(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """BROKER_HEARTBEAT (904): refresh the broker's last-update time."""
        hdr = from_ext(BrokerHeartbeatRequestHeader, req.ext_fields)
        self._routes.update_live(hdr.cluster_name, hdr.broker_addr, self._clock.monotonic_ms())
        return req.make_response()

    async def get_member_group(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_BROKER_MEMBER_GROUP (901)."""
        hdr = from_ext(h.GetBrokerMemberGroupRequestHeader, req.ext_fields)
        addrs = self._routes.member_group(hdr.cluster_name, hdr.broker_name)
        body = bodies.encode_member_group(hdr.cluster_name, hdr.broker_name, addrs)
        return req.make_response(body=body)

    async def wipe_write_perm(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """WIPE_WRITE_PERM_OF_BROKER (205)."""
        hdr = from_ext(h.BrokerNameRequestHeader, req.ext_fields)
        count = self._routes.change_write_perm(hdr.broker_name, add=False)
        log.info("wipe write perm of broker", broker=hdr.broker_name, topics=count)
        return req.make_response(
            ext_fields=to_ext(h.WipeWritePermResponseHeader(wipe_topic_count=count))
        )

    async def add_write_perm(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """ADD_WRITE_PERM_OF_BROKER (327)."""
        hdr = from_ext(h.BrokerNameRequestHeader, req.ext_fields)
        count = self._routes.change_write_perm(hdr.broker_name, add=True)
        log.info("add write perm of broker", broker=hdr.broker_name, topics=count)
        return req.make_response(
            ext_fields=to_ext(h.AddWritePermResponseHeader(add_topic_count=count))
        )

    # -- routes and topics ----------------------------------------------------------------------

    async def get_route_info(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_ROUTEINFO_BY_TOPIC (105), namesrv.md section 5."""
        hdr = from_ext(h.GetRouteInfoRequestHeader, req.ext_fields)
        cfg = self._config()
        if cfg.need_wait_for_service:
            waited = self._clock.monotonic_ms() - self._started_ms
            if waited < cfg.wait_seconds_for_service * 1000:
                return req.make_response(ResponseCode.SYSTEM_ERROR, "name server not ready")
        standard = req.version >= bodies.V4_9_4 or bool(hdr.accept_standard_json_only)
        order_conf = (
            self._kv.get(ORDER_TOPIC_CONFIG, hdr.topic) if cfg.order_message_enable else None
        )
        key = (hdr.topic, standard, cfg.support_acting_master, order_conf)
        cached = self._route_cache.get(key)
        if cached is not None and cached[0] == self._routes.generation:
            return req.make_response(body=cached[1])
        route = self._routes.pickup_topic_route(
            hdr.topic, support_acting_master=cfg.support_acting_master
        )
        if route is None:
            return req.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {hdr.topic}\n"
                f"See {FAQ_URL} for further details.",
            )
        if order_conf is not None:
            route = replace(route, order_topic_conf=order_conf)
        body = bodies.encode_topic_route(route, standard=standard)
        if len(self._route_cache) >= ROUTE_CACHE_MAX:
            self._route_cache.clear()
        self._route_cache[key] = (self._routes.generation, body)
        return req.make_response(body=body)

    async def get_cluster_info(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_BROKER_CLUSTER_INFO (106)."""
        body = bodies.encode_cluster_info(
            self._routes.broker_addr_table, self._routes.cluster_addr_table
        )
        return req.make_response(body=body)

    async def get_all_topics(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206)."""
        if not self._config().enable_all_topic_list:
            return req.make_response(ResponseCode.SYSTEM_ERROR, "disable")
        return req.make_response(body=bodies.encode_topic_list(self._routes.all_topics()))

    async def get_topics_by_cluster(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_TOPICS_BY_CLUSTER (224)."""
        if not self._config().enable_topic_list:
            return req.make_response(ResponseCode.SYSTEM_ERROR, "disable")
        hdr = from_ext(h.GetTopicsByClusterRequestHeader, req.ext_fields)
        topics = self._routes.topics_by_cluster(hdr.cluster)
        return req.make_response(body=bodies.encode_topic_list(topics))

    async def get_system_topics(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS (304)."""
        topics, addr = self._routes.system_topics()
        return req.make_response(body=bodies.encode_topic_list(topics, addr))

    async def _flag_topics(
        self, req: RemotingCommand, *, unit: bool | None, unit_sub: bool | None
    ) -> Response:
        if not self._config().enable_topic_list:
            return req.make_response(ResponseCode.SYSTEM_ERROR, "disable")
        topics = self._routes.topics_with_flags(unit=unit, unit_sub=unit_sub)
        return req.make_response(body=bodies.encode_topic_list(topics))

    async def get_unit_topics(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_UNIT_TOPIC_LIST (311)."""
        return await self._flag_topics(req, unit=True, unit_sub=None)

    async def get_unit_sub_topics(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_HAS_UNIT_SUB_TOPIC_LIST (312)."""
        return await self._flag_topics(req, unit=None, unit_sub=True)

    async def get_unit_sub_ununit_topics(
        self, ctx: RequestContext, req: RemotingCommand
    ) -> Response:
        """GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313)."""
        return await self._flag_topics(req, unit=False, unit_sub=True)

    async def delete_topic(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """DELETE_TOPIC_IN_NAMESRV (216)."""
        hdr = from_ext(h.DeleteTopicFromNamesrvRequestHeader, req.ext_fields)
        self._routes.delete_topic(hdr.topic, hdr.cluster_name)
        log.info("delete topic", topic=hdr.topic, cluster=hdr.cluster_name)
        return req.make_response()

    async def register_topic(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """REGISTER_TOPIC_IN_NAMESRV (217)."""
        hdr = from_ext(h.TopicRequestHeader, req.ext_fields)
        if req.body:
            self._routes.register_topic(hdr.topic, bodies.decode_queue_datas(req.body))
        return req.make_response()

    # -- config ---------------------------------------------------------------------------------

    async def update_namesrv_config(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """UPDATE_NAMESRV_CONFIG (318): .properties body; black-listed keys refused."""
        return await update_config(
            ctx, req, black_list=self._config().black_list(), apply=self._update_config
        )

    async def get_namesrv_config(self, ctx: RequestContext, req: RemotingCommand) -> Response:
        """GET_NAMESRV_CONFIG (319): the effective configuration as .properties text."""
        return config_response(req, self._config().to_properties())
