"""Local mode: the gRPC proxy inside ``mqbroker --enable-proxy``, calling its broker in-process.

Owns: :class:`LocalChannel` (the proxy as its broker sees it: upstream's ``SimpleChannel``; a
request the broker sends on it, CHECK_TRANSACTION_STATE, is dispatched into the proxy's
registry), :class:`InProcessTransport` (the backend's transport: requests to this broker's own
address are handed to its processor registry with a :class:`LocalChannel`, no socket; every other
address, the NameServers and other brokers, goes over remoting, as upstream's
``LocalServiceManager`` keeps ``MQClientAPIFactory`` for routes), :func:`local_proxy` (the
``ProxyService`` over that backend) and :func:`load_local_config` (``-pc rmq-proxy.json`` with
``proxyMode=local`` and the broker's ``namesrvAddr``). Lives in ``cli`` because only ``cli`` may
import both ``rocketpy.broker`` and ``rocketpy.proxy`` (pyproject.toml's layers). Mirrors
``ProxyStartup`` in ``-pm local``, ``LocalServiceManager`` and ``LocalMessageService``. Must not:
reach into broker internals beyond its registry and address.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools

from rocketpy.broker.service import BrokerService
from rocketpy.cli.common import log_dir
from rocketpy.cli.proxy import load_config
from rocketpy.common.aio import TaskSet
from rocketpy.common.errors import ConnectionClosed, RequestTimeout
from rocketpy.proxy.cluster_backend import ClusterBackend
from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.grpc_server import ProxyService
from rocketpy.proxy.transport import RemotingTransport
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import ProcessorRegistry, RequestContext, dispatch

_local_ports = itertools.count(1)


class _BrokerSide:
    """The broker as the proxy's registry sees the requests it sends (its ``peer``)."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.is_closed = False

    def send_response(self, response: RemotingCommand) -> None:
        """Nothing to answer: the broker's requests to the proxy are oneway."""

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """The proxy never asks the broker back on this side."""
        raise ConnectionClosed("the in-process broker side takes no requests")

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """See :meth:`invoke`."""

    def close(self) -> None:
        """Nothing to close."""


class LocalChannel:
    """The proxy's in-process connection to its broker.

    Args:
        broker: the broker (its address names the peer the proxy's processors see).
        proxy_registry: the proxy's processors for requests the broker sends.
    """

    def __init__(self, broker: BrokerService, proxy_registry: ProcessorRegistry) -> None:
        self._broker = broker
        self._registry = proxy_registry
        self._closed = False
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._tasks = TaskSet("proxy/local-channel")
        #: a distinct pseudo port, so the broker's tables tell proxies apart
        self.peer = f"127.0.0.1:{next(_local_ports)}"

    @property
    def is_closed(self) -> bool:
        """True once the proxy stopped."""
        return self._closed

    async def request(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Run ``request`` through the broker's processors; their response (or the one they
        send later on this channel) within ``timeout_s``.

        Raises:
            RequestTimeout: no response in time.
            ConnectionClosed: the channel is closed.
        """
        if self._closed:
            raise ConnectionClosed("the local channel is closed")
        waiter = asyncio.get_running_loop().create_future()
        self._pending[request.opaque] = waiter
        try:
            async with asyncio.timeout(timeout_s):
                response = await dispatch(self._broker.registry, RequestContext(self), request)
                if response is None:
                    response = await waiter
        except TimeoutError as e:
            raise RequestTimeout(f"in-process request {request.code} timed out") from e
        finally:
            self._pending.pop(request.opaque, None)
        return response

    async def oneway(self, request: RemotingCommand) -> None:
        """Run a oneway ``request`` through the broker's processors."""
        if self._closed:
            raise ConnectionClosed("the local channel is closed")
        await dispatch(self._broker.registry, RequestContext(self), request)

    # -- the broker's side of the Channel protocol ---------------------------------------

    def send_response(self, response: RemotingCommand) -> None:
        """A processor answering later (long polling): complete the waiting request."""
        waiter = self._pending.pop(response.opaque, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(response)

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """The broker asks the proxy (none of its requests to clients expect an answer here).

        Raises:
            ConnectionClosed: always; the broker treats the client as unreachable.
        """
        raise ConnectionClosed("the in-process proxy answers only oneway requests")

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """The broker's oneway request (CHECK_TRANSACTION_STATE) into the proxy's registry."""
        if self._closed:
            return
        ctx = RequestContext(_BrokerSide(self._broker.address))
        self._tasks.spawn(dispatch(self._registry, ctx, request), name="proxy/local-check")

    def close(self) -> None:
        """Stop taking requests (the broker sees the channel closed)."""
        self._closed = True

    async def aclose(self) -> None:
        """Close and wait for the broker's requests in flight."""
        self.close()
        await self._tasks.cancel_all()


class InProcessTransport:
    """The Local-mode transport: this broker in-process, every other address over remoting."""

    def __init__(self, broker: BrokerService, registry: ProcessorRegistry) -> None:
        self._broker = broker
        self._remote = RemotingTransport(registry)
        self.channel = LocalChannel(broker, registry)

    def _is_local(self, addr: str) -> bool:
        return addr == self._broker.address

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        """See :meth:`~rocketpy.proxy.transport.BrokerTransport.invoke`."""
        if self._is_local(addr):
            return await self.channel.request(request, timeout_s)
        return await self._remote.invoke(addr, request, timeout_s)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """See :meth:`~rocketpy.proxy.transport.BrokerTransport.invoke_oneway`."""
        if self._is_local(addr):
            await self.channel.oneway(request)
        else:
            await self._remote.invoke_oneway(addr, request)

    async def close(self) -> None:
        """See :meth:`~rocketpy.proxy.transport.BrokerTransport.close`."""
        await self.channel.aclose()
        await self._remote.close()


def load_local_config(proxy_config_path: str | None, namesrv_addr: str | None) -> ProxyConfig:
    """``-pc`` (else ``$ROCKETMQ_HOME/conf/rmq-proxy.json`` when it exists) in ``proxyMode=local``
    with the broker's NameServers; exits 2 with one line on a bad file, as ``mqproxy``."""
    args = argparse.Namespace(
        proxy_config=proxy_config_path,
        namesrv_addr=namesrv_addr or None,
        proxy_mode="local",
    )
    return load_config(args)


def local_proxy(config: ProxyConfig, broker: BrokerService) -> ProxyService:
    """The gRPC proxy over ``broker`` in-process (start it after the broker)."""
    backend = ClusterBackend(
        config, transport=lambda registry: InProcessTransport(broker, registry)
    )
    return ProxyService(config, backend, metrics_dir=log_dir() / "metrics")
