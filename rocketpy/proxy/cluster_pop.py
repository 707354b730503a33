"""POP over remoting for the Cluster backend (``ClusterMessageService``'s consumer half).

Owns: :class:`ClusterPopMixin`, the :class:`~rocketpy.proxy.pop_backend.PopBackend` methods of
``ClusterBackend``: POP_MESSAGE (200050) with the answer decoded as
``MQClientAPIImpl.processPopResponse`` does (``rocketpy.client.simple_consumer.pop_messages``),
ACK_MESSAGE (200051), CHANGE_MESSAGE_INVISIBLETIME (200053) and CONSUMER_SEND_MSG_BACK (36),
each to the master address the caller found in the topic's route (a refused connection expires
the cached routes through that address: :meth:`ClusterPopMixin._broker_unreachable`), on the
backend's one transport (``rocketpy/proxy/transport.py``: remoting in Cluster mode; in Local
mode its own broker's processors in-process, where a long-polled POP is answered later on the
local channel).
Must not: import ``rocketpy.broker`` or know gRPC messages.
"""

from __future__ import annotations

from typing import Final

from rocketpy.client.admin import TopicRoute
from rocketpy.client.simple_consumer import pop_messages
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ConnectFailed, ConnectionClosed, RequestTimeout
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pop_backend import PopOutcome, PopStatus
from rocketpy.proxy.status import ProxyError, code_for_remoting
from rocketpy.proxy.transport import BrokerTransport
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.broker import ConsumerSendMsgBackRequestHeader
from rocketpy.remoting.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
)

_POP_STATUS: Final[dict[int, PopStatus]] = {
    ResponseCode.POLLING_FULL: PopStatus.POLLING_FULL,
    ResponseCode.POLLING_TIMEOUT: PopStatus.POLLING_NOT_FOUND,
    ResponseCode.PULL_NOT_FOUND: PopStatus.POLLING_NOT_FOUND,
}


class ClusterPopMixin:
    """POP requests on ``self._remoting`` (``ClusterBackend`` owns the transport)."""

    _remoting: BrokerTransport
    #: topic -> (route, loop time fetched), kept by ``ClusterBackend.topic_route``.
    _routes: dict[str, tuple[TopicRoute, float]]

    def _broker_unreachable(self, addr: str, error: ConnectionClosed) -> None:
        """After a connection to ``addr`` could not be made, expire the cached routes through it:
        a broker restarted on a new address is reached by the next request instead of after the
        cache's refresh period (the cached route is still served if the name server fails)."""
        if not isinstance(error, ConnectFailed):
            return
        for topic, (route, _) in list(self._routes.items()):
            if any(addr in b.broker_addrs.values() for b in route.brokers):
                self._routes[topic] = (route, float("-inf"))

    async def _invoke(
        self, what: str, addr: str, request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        try:
            return await self._remoting.invoke(addr, request, timeout_s)
        except RequestTimeout as e:
            raise ProxyError(pb.Code.PROXY_TIMEOUT, f"{what} to {addr} timed out") from e
        except ConnectionClosed as e:
            self._broker_unreachable(addr, e)
            raise ProxyError(pb.Code.INTERNAL_SERVER_ERROR, f"{what} to {addr}: {e}") from e

    async def pop_message(
        self, broker_name: str, broker_addr: str, header: PopMessageRequestHeader, timeout_s: float
    ) -> PopOutcome:
        """See :meth:`PopBackend.pop_message`."""
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, to_ext(header))
        try:
            response = await self._remoting.invoke(broker_addr, request, timeout_s)
        except RequestTimeout:
            return PopOutcome(PopStatus.POLLING_NOT_FOUND)
        except ConnectionClosed as e:
            self._broker_unreachable(broker_addr, e)
            raise ProxyError(pb.Code.INTERNAL_SERVER_ERROR, f"pop to {broker_addr}: {e}") from e
        if response.code == ResponseCode.SUCCESS:
            found = pop_messages(
                response, topic=header.topic, broker_name=broker_name, broker_addr=broker_addr
            )
            return PopOutcome(PopStatus.FOUND, found)
        status = _POP_STATUS.get(response.code)
        if status is not None:
            return PopOutcome(status)
        if response.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED:
            raise ProxyError(pb.Code.ILLEGAL_FILTER_EXPRESSION, response.remark or "bad filter")
        raise ProxyError(code_for_remoting(response.code), response.remark or str(response.code))

    async def ack_message(
        self, broker_addr: str, header: AckMessageRequestHeader, timeout_s: float
    ) -> bool:
        """See :meth:`PopBackend.ack_message`."""
        request = RemotingCommand.request(RequestCode.ACK_MESSAGE, to_ext(header))
        response = await self._invoke("ack", broker_addr, request, timeout_s)
        return response.code == ResponseCode.SUCCESS

    async def change_invisible_time(
        self, broker_addr: str, header: ChangeInvisibleTimeRequestHeader, timeout_s: float
    ) -> ChangeInvisibleTimeResponseHeader:
        """See :meth:`PopBackend.change_invisible_time`."""
        request = RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, to_ext(header))
        response = await self._invoke("changeInvisibleTime", broker_addr, request, timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise ProxyError(
                pb.Code.INTERNAL_SERVER_ERROR,
                f"changeInvisibleTime failed: {response.remark or response.code}",
            )
        return from_ext(ChangeInvisibleTimeResponseHeader, response.ext_fields)

    async def send_message_back(
        self, broker_addr: str, header: ConsumerSendMsgBackRequestHeader, timeout_s: float
    ) -> None:
        """See :meth:`PopBackend.send_message_back`."""
        request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, to_ext(header))
        response = await self._invoke("sendMessageBack", broker_addr, request, timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise ProxyError(
                code_for_remoting(response.code), response.remark or str(response.code)
            )
