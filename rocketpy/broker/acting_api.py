"""ActingMasterAPI: the broker's requests of slave-acting-master mode.

Owns: BROKER_HEARTBEAT (904, oneway) and GET_BROKER_MEMBER_GROUP (901) to the NameServers,
EXCHANGE_BROKER_HA_INFO (906), GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45) to a
peer broker of the same set, GET_ROUTEINFO_BY_TOPIC (105) and SEND_MESSAGE (10) for the escape
bridge. Every request has its own deadline; failures raise :class:`RemotingError` /
:class:`RemoteError` to the caller, which decides whether to retry. Mirrors the acting-master part
of ``broker/out/BrokerOuterAPI`` (sendHeartbeat, syncBrokerMemberGroup, sendBrokerHaInfo,
retrieveBrokerHaInfo, getAllConsumerOffset, getAllDelayOffset, sendMessageToSpecificBroker).
Must not: import the NameServer package; decide anything (the services do).

Decided: ``compatibleWithOldNameSrv`` (heartbeat through QUERY_DATA_VERSION, member group through
the route of ``rmq_sys_SYNC_BROKER_MEMBER_<brokerName>``) is not implemented: rocketpy's
NameServer serves 904 and 901, so they are always used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from rocketpy.client.admin import TopicRoute, parse_route
from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import CodecError, RemoteError, RemotingError
from rocketpy.remoting.protocol.bodies.controller import BrokerMemberGroup
from rocketpy.remoting.protocol.body.broker import (
    LockBatchRequestBody,
    MessageQueue,
    decode_lock_batch_response,
    encode_lock_batch_request,
)
from rocketpy.remoting.protocol.body.config_shapes import (
    ConsumerOffsetTable,
    DelayOffsetTable,
    decode_consumer_offsets,
    decode_delay_offsets,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.broker import (
    ExchangeHAInfoHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from rocketpy.remoting.protocol.headers.controller import BrokerHeartbeatRequestHeader
from rocketpy.remoting.protocol.headers.namesrv import GetBrokerMemberGroupRequestHeader
from rocketpy.remoting.transport.client import RemotingClient

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerSyncInfo:
    """``BrokerSyncInfo``: what EXCHANGE_BROKER_HA_INFO answers."""

    master_ha_address: str | None
    master_flush_offset: int
    master_address: str | None


def _ok(response: RemotingCommand) -> RemotingCommand:
    if response.code != ResponseCode.SUCCESS:
        raise RemoteError.for_code(response.code, response.remark or "")
    return response


class ActingMasterAPI:
    """Requests of the acting-master machinery (heartbeats, member groups, HA info, metadata)."""

    def __init__(self, client: RemotingClient, *, timeout_ms: int) -> None:
        """Args: ``client`` the broker's outbound remoting client; ``timeout_ms`` the deadline of
        each request (``sendHeartbeatTimeoutMillis`` scale; sends use three times it)."""
        self._client = client
        self._timeout_s = timeout_ms / 1000

    async def _invoke(
        self, addr: str, request: RemotingCommand, factor: float = 1.0
    ) -> RemotingCommand:
        return _ok(await self._client.invoke(addr, request, self._timeout_s * factor))

    async def send_heartbeat(
        self, namesrvs: Sequence[str], *, cluster: str, broker_addr: str, broker_name: str
    ) -> None:
        """``sendHeartbeat``: oneway BROKER_HEARTBEAT to every NameServer (failures logged)."""
        header = BrokerHeartbeatRequestHeader(
            cluster_name=cluster, broker_addr=broker_addr, broker_name=broker_name
        )
        for addr in namesrvs:
            request = RemotingCommand.request(
                RequestCode.BROKER_HEARTBEAT, to_ext(header), oneway=True
            )
            try:
                async with asyncio.timeout(self._timeout_s):
                    await self._client.invoke_oneway(addr, request)
            except (RemotingError, TimeoutError) as e:
                log.warning("sendHeartbeat Exception", namesrv=addr, error=repr(e))

    async def lock_batch_mq(
        self, addr: str, body: LockBatchRequestBody, timeout_s: float
    ) -> tuple[MessageQueue, ...]:
        """``BrokerOuterAPI.lockBatchMQAsync``: LOCK_BATCH_MQ on another member of the set;
        the queues it locked.

        Raises:
            RemotingError: no answer in time, or an error answer.
        """
        request = RemotingCommand.request(
            RequestCode.LOCK_BATCH_MQ, None, encode_lock_batch_request(body)
        )
        response = _ok(await self._client.invoke(addr, request, timeout_s))
        return decode_lock_batch_response(response.body)

    async def sync_broker_member_group(
        self, namesrvs: Sequence[str], *, cluster: str, broker_name: str
    ) -> BrokerMemberGroup:
        """``syncBrokerMemberGroup``: the live members of this broker set, from the first
        NameServer that answers.

        Raises:
            RemotingError: no NameServer answered.
        """
        header = GetBrokerMemberGroupRequestHeader(cluster_name=cluster, broker_name=broker_name)
        last: Exception = RemotingError("no name server configured")
        for addr in namesrvs:
            request = RemotingCommand.request(RequestCode.GET_BROKER_MEMBER_GROUP, to_ext(header))
            try:
                response = await self._invoke(addr, request)
                obj = fastjson.loads(response.body or b"{}")
            except (RemotingError, RemoteError, CodecError) as e:
                last = e
                continue
            group = obj.get("brokerMemberGroup") if isinstance(obj, dict) else None
            if group is None:
                return BrokerMemberGroup(cluster=cluster, broker_name=broker_name)
            return BrokerMemberGroup.from_json_value(group)
        raise RemotingError(f"syncBrokerMemberGroup failed: {last}") from last

    async def exchange_ha_info(self, addr: str, info: ExchangeHAInfoHeader) -> BrokerSyncInfo:
        """EXCHANGE_BROKER_HA_INFO: ``sendBrokerHaInfo`` (fields set) or
        ``retrieveBrokerHaInfo`` (fields empty; the master answers with its own)."""
        request = RemotingCommand.request(RequestCode.EXCHANGE_BROKER_HA_INFO, to_ext(info))
        response = await self._invoke(addr, request)
        h = from_ext(ExchangeHAInfoHeader, response.ext_fields)
        return BrokerSyncInfo(
            master_ha_address=h.master_ha_address,
            master_flush_offset=h.master_flush_offset or 0,
            master_address=h.master_address,
        )

    async def get_all_consumer_offset(self, addr: str) -> ConsumerOffsetTable:
        """GET_ALL_CONSUMER_OFFSET from a peer broker."""
        request = RemotingCommand.request(RequestCode.GET_ALL_CONSUMER_OFFSET, {})
        response = await self._invoke(addr, request, 3.0)
        return decode_consumer_offsets(response.body or b"{}")

    async def get_all_delay_offset(self, addr: str) -> DelayOffsetTable:
        """GET_ALL_DELAY_OFFSET from a peer broker."""
        request = RemotingCommand.request(RequestCode.GET_ALL_DELAY_OFFSET, {})
        response = await self._invoke(addr, request, 3.0)
        return decode_delay_offsets(response.body or b"{}")

    async def topic_route(self, namesrvs: Sequence[str], topic: str) -> TopicRoute | None:
        """GET_ROUTEINFO_BY_TOPIC from the first NameServer that answers; None when unknown.

        Raises:
            RemotingError: no NameServer answered.
        """
        last: Exception = RemotingError("no name server configured")
        for addr in namesrvs:
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            try:
                response = await self._client.invoke(addr, request, self._timeout_s)
            except RemotingError as e:
                last = e
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
            try:
                return parse_route(_ok(response).body or b"{}")
            except (RemoteError, CodecError, KeyError, ValueError, TypeError) as e:
                last = e
        raise RemotingError(f"topic route of {topic} not available: {last}") from last

    async def send_message(
        self, addr: str, header: SendMessageRequestHeader, body: bytes
    ) -> SendMessageResponseHeader:
        """``sendMessageToSpecificBroker``: SEND_MESSAGE (10) and its SEND_OK header.

        Raises:
            RemoteError: the broker answered anything but SUCCESS.
            RemotingError: no answer.
        """
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE, to_ext(header), body)
        response = await self._invoke(addr, request, 3.0)
        return from_ext(SendMessageResponseHeader, response.ext_fields)
