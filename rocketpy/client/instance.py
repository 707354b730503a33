"""What every client (producer, consumer) shares: identity, connections, routes, timers.

Owns: the client id (``ip@instanceName``, ``ClientConfig.buildMQClientId``), one
:class:`RemotingClient` whose connections also carry broker-initiated requests, one
:class:`TopicRouteCache`, the background tasks (route refresh every ``pollNameServerInterval``,
heartbeat every ``heartbeatBrokerInterval``) owned by a :class:`TaskSet` and cancelled on stop,
HEART_BEAT and UNREGISTER_CLIENT. Mirrors the parts of ``MQClientInstance`` a single producer or
consumer needs; each client object has its own instance (Java shares one per client id).
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import time
from collections.abc import Awaitable, Callable

import structlog

from rocketpy.client.route_cache import TopicRouteCache
from rocketpy.common.aio import TaskSet, periodic
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ClientError, ConnectionClosed, RemoteError, RequestTimeout
from rocketpy.remoting.protocol.body.broker import MessageQueue
from rocketpy.remoting.protocol.body.heartbeat import ConsumerData, HeartbeatData, encode_heartbeat
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import to_ext
from rocketpy.remoting.protocol.headers.broker import UnregisterClientRequestHeader
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.dispatch import Processor, ProcessorRegistry

log = structlog.get_logger(__name__)


@functools.cache
def client_ip() -> str:
    """The local IPv4 address a client reports (``RemotingUtil.getLocalAddress``): the source
    address of a route to a public address, else loopback. No packet is sent."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: only selects a source address
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def default_instance_name() -> str:
    """``ClientConfig.changeInstanceNameToPID`` (5.x): ``pid#nanoTime``, so two clients in one
    process get different ids."""
    return f"{os.getpid()}#{time.monotonic_ns()}"


class ClientInstance:
    """Connections, routes and timers of one client object."""

    def __init__(
        self,
        namesrv_addr: str,
        *,
        instance_name: str | None = None,
        request_timeout_s: float = 3.0,
        poll_namesrv_interval_s: float = 30.0,
        heartbeat_interval_s: float = 30.0,
        name: str = "client",
    ) -> None:
        self.client_ip = client_ip()
        self.instance_name = instance_name or default_instance_name()
        self.client_id = f"{self.client_ip}@{self.instance_name}"
        self.request_timeout_s = request_timeout_s
        self._poll_interval_s = poll_namesrv_interval_s
        self._heartbeat_interval_s = heartbeat_interval_s
        self.registry = ProcessorRegistry()
        # A dead broker is dialled again after 50 ms, 100 ms, ... at most every second.
        self.remoting = RemotingClient(
            registry=self.registry, name=f"{name}/{self.client_id}", reconnect_backoff=(0.05, 1.0)
        )
        self.routes = TopicRouteCache(self.remoting, namesrv_addr, timeout_s=request_timeout_s)
        self.tasks = TaskSet(f"{name}/{self.client_id}")
        #: ``PullAPIWrapper.pullFromWhichNodeTable``: queue -> the broker id the last pull
        #: response suggested (``suggestWhichBrokerId``); absent means the master.
        self.pull_from_which_node: dict[MessageQueue, int] = {}
        self.stop_event = asyncio.Event()
        self.producer_groups: tuple[str, ...] = ()
        self.consumer_data: Callable[[], tuple[ConsumerData, ...]] = tuple
        self._name = name
        self._started = False
        self._heartbeated: set[str] = set()

    def register(self, code: int, processor: Processor) -> None:
        """Handle a request a broker sends on our connections (NOTIFY_CONSUMER_IDS_CHANGED)."""
        self.registry.register(code, processor)

    def start(self) -> None:
        """Start the route-refresh and heartbeat loops."""
        if self._started:
            return
        self._started = True
        self.every(self._poll_interval_s, self.routes.refresh_all, "route-refresh")
        self.every(self._heartbeat_interval_s, self.heartbeat_all, "heartbeat")

    def every(self, interval_s: float, fn: Callable[[], Awaitable[None]], what: str) -> None:
        """Run ``fn`` every ``interval_s`` until stop, as an owned task."""
        name = f"{self._name}/{what}"
        self.tasks.spawn(periodic(interval_s, fn, stop=self.stop_event, name=name), name=name)

    async def invoke(
        self, addr: str, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        """One request with the client's request timeout; remoting errors propagate."""
        request = RemotingCommand.request(code, ext, body)
        return await self.remoting.invoke(addr, request, self.request_timeout_s)

    async def invoke_ok(
        self, addr: str, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        """:meth:`invoke`, raising :class:`RemoteError` unless the response is SUCCESS."""
        response = await self.invoke(addr, code, ext, body)
        if response.code != ResponseCode.SUCCESS:
            raise RemoteError.for_code(response.code, response.remark or "")
        return response

    async def invoke_oneway(self, addr: str, code: int, ext: dict[str, str]) -> None:
        """A oneway request, connecting within the request timeout."""
        async with asyncio.timeout(self.request_timeout_s):
            await self.remoting.invoke_oneway(addr, RemotingCommand.request(code, ext))

    def heartbeat_body(self) -> bytes:
        """The ``HeartbeatData`` JSON of this client."""
        data = HeartbeatData(
            client_id=self.client_id,
            producer_groups=self.producer_groups,
            consumer_data_set=self.consumer_data(),
        )
        return encode_heartbeat(data)

    async def heartbeat_all(self, *, only_new: bool = False) -> None:
        """HEART_BEAT to every known broker (masters only for a producer-only client).

        Args:
            only_new: only brokers this client has not yet reached (a route fetched after start
                named a new broker; waiting for the 30 s timer would leave it unregistered).
        """
        consumers = self.consumer_data()
        body = self.heartbeat_body()
        for addr in self.routes.all_broker_addrs(masters_only=not consumers):
            if only_new and addr in self._heartbeated:
                continue
            try:
                await self.invoke_ok(addr, RequestCode.HEART_BEAT, None, body)
            except (ConnectionClosed, RequestTimeout, RemoteError) as e:
                log.warning("send heart beat to broker failed", broker=addr, error=str(e))
            else:
                self._heartbeated.add(addr)

    async def unregister_all(self, producer_group: str | None, consumer_group: str | None) -> None:
        """UNREGISTER_CLIENT to every known broker (shutdown); failures are logged."""
        header = UnregisterClientRequestHeader(
            client_id=self.client_id, producer_group=producer_group, consumer_group=consumer_group
        )
        ext = to_ext(header)
        for addr in self.routes.all_broker_addrs():
            try:
                await self.invoke_ok(addr, RequestCode.UNREGISTER_CLIENT, dict(ext))
            except (ConnectionClosed, RequestTimeout, RemoteError) as e:
                log.warning("unregister client failed", broker=addr, error=str(e))

    async def close(self) -> None:
        """Stop the loops and close every connection (idempotent)."""
        self.stop_event.set()
        await self.tasks.cancel_all()
        await self.remoting.close()

    def check_started(self) -> None:
        """Raise unless :meth:`start` ran.

        Raises:
            ClientError: not started (or already shut down).
        """
        if not self._started or self.stop_event.is_set():
            raise ClientError(f"The {self._name} service state not OK, maybe started once")
