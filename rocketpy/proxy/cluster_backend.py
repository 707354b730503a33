"""The Cluster-mode backend: NameServer routes and broker requests over remoting.

Owns: :class:`ClusterBackend` (upstream ``ClusterServiceManager`` with ``TopicRouteService``,
``ClusterMetadataService`` and ``ClusterMessageService``: GET_ROUTEINFO_BY_TOPIC (105) to the
NameServers, GET_TOPIC_CONFIG (351) to a master of the topic, SEND_MESSAGE_V2 (310) or
SEND_BATCH_MESSAGE (320) to the chosen master; proxy.md sections 2 and 4). Routes and topic configs
are cached and re-fetched once older than ``topicRouteServiceCacheRefreshSeconds`` /
``topicConfigCacheRefreshSeconds``; a stale entry is served while a NameServer cannot be reached.
Must not: import ``rocketpy.broker`` or know gRPC.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Sequence
from typing import Final

import structlog

from rocketpy.client.admin import TopicRoute, parse_route
from rocketpy.client.instance import client_ip
from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ConnectionClosed, RequestTimeout
from rocketpy.common.message.batch_body import encode_batch_body
from rocketpy.common.message.client_id import UniqIdGenerator
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import encode_properties
from rocketpy.proxy.backend import SendOutcome
from rocketpy.proxy.cluster_pop import ClusterPopMixin
from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.route import MASTER_ID, TopicMessageType, topic_message_type
from rocketpy.proxy.send import OutgoingMessage
from rocketpy.proxy.status import ProxyError, code_for_remoting
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import to_ext
from rocketpy.remoting.protocol.headers.broker import SendMessageRequestHeaderV2, TopicRequestHeader
from rocketpy.remoting.protocol.headers.namesrv import GetRouteInfoRequestHeader
from rocketpy.remoting.transport.client import RemotingClient

log = structlog.get_logger(__name__)

AUTO_CREATE_TOPIC: Final = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
_SEND_STATUS: Final[dict[int, str]] = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}


class ClusterBackend(ClusterPopMixin):
    """Brokers reached through the NameServers (``proxyMode=cluster``); POP requests come from
    :class:`ClusterPopMixin`."""

    def __init__(self, config: ProxyConfig) -> None:
        self._config = config
        self._namesrvs = [a.strip() for a in config.namesrv_addr.split(";") if a.strip()]
        self._timeout_s = config.proxy_request_timeout_ms / 1000
        self._remoting = RemotingClient(name="proxy", reconnect_backoff=(0.05, 1.0))
        #: topic -> (route, loop time fetched)
        self._routes: dict[str, tuple[TopicRoute, float]] = {}
        #: topic -> (message type, loop time fetched)
        self._types: dict[str, tuple[TopicMessageType, float]] = {}
        self._ns_index = 0
        #: UNIQ_KEYs of batches (``MessageClientIDSetter``; each message keeps the client's).
        self._ids = UniqIdGenerator(
            client_ip(), os.getpid(), random.getrandbits(32), now_ms=time.time_ns() // 1_000_000
        )

    async def start(self) -> None:
        """Nothing to dial ahead: connections open on the first request."""
        if not self._namesrvs:
            log.warning("no name server address: every route query will fail")

    async def stop(self) -> None:
        """Close every remoting connection."""
        await self._remoting.close()

    def _fresh(self, fetched_at: float, max_age_s: int) -> bool:
        return asyncio.get_running_loop().time() - fetched_at < max_age_s

    async def topic_route(self, topic: str) -> TopicRoute:
        """See :meth:`MessagingBackend.topic_route`."""
        cached = self._routes.get(topic)
        if cached and self._fresh(cached[1], self._config.topic_route_service_cache_refresh_s):
            return cached[0]
        try:
            route = await self._fetch_route(topic)
        except ProxyError as e:
            if cached is not None and e.code != pb.Code.TOPIC_NOT_FOUND:
                log.warning(
                    "route refresh failed, serving the cached one", topic=topic, error=str(e)
                )
                return cached[0]
            self._routes.pop(topic, None)
            raise
        self._routes[topic] = (route, asyncio.get_running_loop().time())
        return route

    async def _fetch_route(self, topic: str) -> TopicRoute:
        """GET_ROUTEINFO_BY_TOPIC, trying each NameServer once from the last good one."""
        ext = to_ext(GetRouteInfoRequestHeader(topic=topic))
        last: Exception | None = None
        for _ in range(len(self._namesrvs)):
            addr = self._namesrvs[self._ns_index % len(self._namesrvs)]
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
            try:
                response = await self._remoting.invoke(addr, request, self._timeout_s)
            except (ConnectionClosed, RequestTimeout) as e:
                last = e
                self._ns_index += 1
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                raise ProxyError(pb.Code.TOPIC_NOT_FOUND, f"topic {topic} not found")
            if response.code != ResponseCode.SUCCESS:
                raise ProxyError(code_for_remoting(response.code), response.remark or "")
            return parse_route(response.body or b"{}")
        code = (
            pb.Code.PROXY_TIMEOUT
            if isinstance(last, RequestTimeout)
            else pb.Code.INTERNAL_SERVER_ERROR
        )
        raise ProxyError(code, f"no name server answered: {last}")

    async def topic_message_type(self, topic: str, route: TopicRoute) -> TopicMessageType:
        """See :meth:`MessagingBackend.topic_message_type`."""
        cached = self._types.get(topic)
        if cached and self._fresh(cached[1], self._config.topic_config_cache_refresh_s):
            return cached[0]
        kind = await self._fetch_message_type(topic, route)
        self._types[topic] = (kind, asyncio.get_running_loop().time())
        return kind

    async def _fetch_message_type(self, topic: str, route: TopicRoute) -> TopicMessageType:
        """GET_TOPIC_CONFIG to the masters of ``route`` until one has the topic."""
        ext = to_ext(TopicRequestHeader(topic=topic))
        for broker in route.brokers:
            addr = broker.broker_addrs.get(MASTER_ID)
            if addr is None:
                continue
            request = RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, ext)
            try:
                response = await self._remoting.invoke(addr, request, self._timeout_s)
            except (ConnectionClosed, RequestTimeout) as e:
                log.warning("getTopicConfig failed", topic=topic, broker=addr, error=str(e))
                continue
            if response.code != ResponseCode.SUCCESS:
                continue
            obj = fastjson.loads(response.body or b"{}")
            attributes = obj.get("attributes") if isinstance(obj, dict) else None
            return topic_message_type(attributes if isinstance(attributes, dict) else None)
        return TopicMessageType.UNSPECIFIED

    async def send_message(
        self, broker_name: str, broker_addr: str, queue_id: int,
        messages: Sequence[OutgoingMessage], timeout_s: float,
    ) -> SendOutcome:  # fmt: skip
        """See :meth:`MessagingBackend.send_message` (``buildSendMessageRequestHeader``)."""
        first = messages[0]
        if len(messages) == 1:
            code, props, body = RequestCode.SEND_MESSAGE_V2, first.properties, first.body
        else:  # MessageBatch.generateFromList + encode: the batch has its own UNIQ_KEY
            code = RequestCode.SEND_BATCH_MESSAGE
            uniq = self._ids.create(time.time_ns() // 1_000_000)
            props = {MessageConst.WAIT: "true", MessageConst.UNIQ_KEY: uniq}
            body = encode_batch_body((0, m.body, encode_properties(m.properties)) for m in messages)
        header = SendMessageRequestHeaderV2(
            a=first.topic, b=first.topic, c=AUTO_CREATE_TOPIC, d=4, e=queue_id,
            f=first.sys_flag, g=first.born_timestamp_ms, h=0, i=encode_properties(props), j=0,
            k=False, m=len(messages) > 1, n=broker_name,
        )  # fmt: skip
        request = RemotingCommand.request(code, to_ext(header), body)
        try:
            response = await self._remoting.invoke(broker_addr, request, timeout_s)
        except RequestTimeout as e:
            raise ProxyError(pb.Code.PROXY_TIMEOUT, f"send to {broker_addr} timed out") from e
        except ConnectionClosed as e:
            raise ProxyError(pb.Code.INTERNAL_SERVER_ERROR, f"send to {broker_addr}: {e}") from e
        status = _SEND_STATUS.get(response.code)
        if status is None:
            raise ProxyError(
                code_for_remoting(response.code), response.remark or str(response.code)
            )
        ext = response.ext_fields or {}
        return SendOutcome(
            send_status=status,
            offset_msg_id=ext.get("msgId", ""),
            queue_id=int(ext.get("queueId", queue_id)),
            queue_offset=int(ext.get("queueOffset", -1)),
            transaction_id=ext.get("transactionId", ""),
        )
