"""The backend: NameServer routes and broker requests as remoting commands over a transport.

Owns: :class:`ClusterBackend` (upstream ``ClusterServiceManager`` with ``TopicRouteService``,
``ClusterMetadataService``, ``ClusterMessageService`` and ``ClusterTransactionService``'s broker
side: GET_ROUTEINFO_BY_TOPIC (105) to the NameServers, GET_TOPIC_CONFIG (351) to a master of the
topic, GET_SUBSCRIPTIONGROUP_CONFIG (352) to a master of the cluster, SEND_MESSAGE_V2 (310) or
SEND_BATCH_MESSAGE (320) to the chosen master, END_TRANSACTION (37) oneway, HEART_BEAT (34) with
the producer groups, and the brokers' CHECK_TRANSACTION_STATE (39) decoded and handed to
``on_transaction_check``; proxy.md sections 2 and 4). Routes, topic and group configs are cached
and re-fetched once older than ``topicRouteServiceCacheRefreshSeconds`` /
``topicConfigCacheRefreshSeconds``; a stale route is served while a NameServer cannot be reached.
The transport is remoting (Cluster mode) unless the caller passes another: Local mode's calls
its broker's processors in-process for that broker's address. Must not: import
``rocketpy.broker`` or know gRPC.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable, Collection, Sequence
from typing import Final

import structlog

from rocketpy.client.admin import TopicRoute, split_namesrv_addr
from rocketpy.client.instance import client_ip
from rocketpy.client.message import decode_message_exts
from rocketpy.client.route_cache import NoNameServerAnswered, RouteFetcher
from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import CodecError, ConnectionClosed, RemoteError, RequestTimeout
from rocketpy.common.message.batch_body import encode_batch_body
from rocketpy.common.message.client_id import UniqIdGenerator
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import encode_properties
from rocketpy.proxy.backend import GroupSettings, SendOutcome
from rocketpy.proxy.cluster_pop import ClusterPopMixin
from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.route import MASTER_ID, TopicMessageType, topic_message_type
from rocketpy.proxy.send import OutgoingMessage
from rocketpy.proxy.status import ProxyError, code_for_remoting
from rocketpy.proxy.transaction import TransactionCheck
from rocketpy.proxy.transport import RemotingTransport, TransportFactory
from rocketpy.remoting.protocol.body.heartbeat import HeartbeatData, encode_heartbeat
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.broker import (
    GetSubscriptionGroupConfigRequestHeader,
    SendMessageRequestHeaderV2,
    TopicRequestHeader,
)
from rocketpy.remoting.protocol.headers.transaction import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from rocketpy.remoting.transport.dispatch import ProcessorRegistry, RequestContext

log = structlog.get_logger(__name__)

AUTO_CREATE_TOPIC: Final = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
_SEND_STATUS: Final[dict[int, str]] = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}


class ClusterBackend(ClusterPopMixin):
    """Brokers reached through the NameServers; POP requests come from :class:`ClusterPopMixin`
    (on the same transport, so they reach a Local-mode broker in-process too).

    Args:
        config: the proxy's settings.
        transport: builds the transport (given the registry for the brokers' requests);
            remoting when None (``proxyMode=cluster``).
    """

    def __init__(self, config: ProxyConfig, transport: TransportFactory | None = None) -> None:
        self._config = config
        self._timeout_s = config.proxy_request_timeout_ms / 1000
        registry = ProcessorRegistry()
        registry.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)
        self._remoting = (transport or RemotingTransport)(registry)
        self._route_fetcher = RouteFetcher(
            self._remoting.invoke, split_namesrv_addr(config.namesrv_addr), self._timeout_s
        )
        self.on_transaction_check: Callable[[TransactionCheck], None] | None = None
        #: topic -> (route, loop time fetched)
        self._routes: dict[str, tuple[TopicRoute, float]] = {}
        #: topic -> (message type, loop time fetched)
        self._types: dict[str, tuple[TopicMessageType, float]] = {}
        #: group -> (settings, loop time fetched)
        self._groups: dict[str, tuple[GroupSettings, float]] = {}
        #: UNIQ_KEYs of batches (``MessageClientIDSetter``; each message keeps the client's).
        self._ids = UniqIdGenerator(
            client_ip(), os.getpid(), random.getrandbits(32), now_ms=time.time_ns() // 1_000_000
        )

    async def start(self) -> None:
        """Nothing to dial ahead: connections open on the first request."""
        if not split_namesrv_addr(self._config.namesrv_addr):
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
        try:
            route = await self._route_fetcher.fetch(topic)
        except RemoteError as e:
            raise ProxyError(code_for_remoting(e.code), e.remark) from e
        except NoNameServerAnswered as e:
            timed_out = isinstance(e.last, RequestTimeout)
            code = pb.Code.PROXY_TIMEOUT if timed_out else pb.Code.INTERNAL_SERVER_ERROR
            raise ProxyError(code, str(e)) from e
        if route is None:
            raise ProxyError(pb.Code.TOPIC_NOT_FOUND, f"topic {topic} not found")
        return route

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
            self._broker_unreachable(broker_addr, e)
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

    async def end_transaction(self, broker_addr: str, header: EndTransactionRequestHeader) -> None:
        """See :meth:`MessagingBackend.end_transaction`."""
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, to_ext(header), oneway=True)
        try:
            await self._remoting.invoke_oneway(broker_addr, request)
        except (ConnectionClosed, RequestTimeout) as e:
            raise ProxyError(
                pb.Code.INTERNAL_SERVER_ERROR, f"end transaction to {broker_addr}: {e}"
            ) from e

    async def register_producer(
        self, broker_addrs: Collection[str], client_id: str, groups: Collection[str]
    ) -> None:
        """See :meth:`MessagingBackend.register_producer`."""
        body = encode_heartbeat(HeartbeatData(client_id=client_id, producer_groups=tuple(groups)))
        for addr in broker_addrs:
            request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)
            try:
                response = await self._remoting.invoke(addr, request, self._timeout_s)
            except (ConnectionClosed, RequestTimeout) as e:
                log.warning("producer heartbeat failed", broker=addr, error=str(e))
                continue
            if response.code != ResponseCode.SUCCESS:
                log.warning("producer heartbeat refused", broker=addr, remark=response.remark)

    async def subscription_group(self, group: str) -> GroupSettings:
        """See :meth:`MessagingBackend.subscription_group`; the defaults, not cached, while the
        cluster's route cannot be had."""
        cached = self._groups.get(group)
        if cached and self._fresh(cached[1], self._config.topic_config_cache_refresh_s):
            return cached[0]
        try:
            route = await self.topic_route(self._config.rocketmq_cluster_name)
        except ProxyError as e:
            log.warning(
                "no route to the cluster, group config defaults", group=group, error=e.message
            )
            return cached[0] if cached else GroupSettings()
        found = await self._fetch_group(group, route)
        self._groups[group] = (found, asyncio.get_running_loop().time())
        return found

    async def _fetch_group(self, group: str, route: TopicRoute) -> GroupSettings:
        """``ClusterMetadataService.getSubscriptionGroupConfig``: the masters of the cluster's
        route (the topic named ``rocketMQClusterName``), until one has the group."""
        ext = to_ext(GetSubscriptionGroupConfigRequestHeader(group=group))
        for broker in route.brokers:
            addr = broker.broker_addrs.get(MASTER_ID)
            if addr is None:
                continue
            request = RemotingCommand.request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, ext)
            try:
                response = await self._remoting.invoke(addr, request, self._timeout_s)
            except (ConnectionClosed, RequestTimeout) as e:
                log.warning(
                    "getSubscriptionGroupConfig failed", group=group, broker=addr, error=str(e)
                )
                continue
            if response.code != ResponseCode.SUCCESS:
                continue
            obj = fastjson.loads(response.body or b"{}")
            if isinstance(obj, dict):
                return GroupSettings(
                    consume_message_orderly=bool(obj.get("consumeMessageOrderly", False)),
                    retry_max_times=int(obj.get("retryMaxTimes", 16)),
                )
        return GroupSettings()

    async def _on_check(self, ctx: RequestContext, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (oneway, ``ProxyClientRemotingProcessor``): decode and hand
        it up; nobody listening, or a body that does not decode, is logged and dropped."""
        try:
            header = from_ext(CheckTransactionStateRequestHeader, request.ext_fields)
            msgs = decode_message_exts(request.body or b"", header.bname or "")
        except CodecError as e:
            log.warning("checkTransactionState: bad request", error=str(e))
            return
        listener = self.on_transaction_check
        if not msgs or listener is None:
            log.warning("checkTransactionState dropped", has_message=bool(msgs))
            return
        listener(
            TransactionCheck(
                broker_name=header.bname or msgs[0].broker_name,
                broker_addr=ctx.channel.peer,
                tran_state_table_offset=header.tran_state_table_offset,
                commit_log_offset=header.commit_log_offset,
                transaction_id=header.transaction_id or msgs[0].msg_id,
                message=msgs[0],
            )
        )
