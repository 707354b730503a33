"""Topic routes as a client uses them: publish queues, subscribe queues, broker addresses.

Owns: :class:`TopicRouteCache` (the route part of ``MQClientInstance``:
``updateTopicRouteInfoFromNameServer``, ``topicRouteData2TopicPublishInfo``,
``topicRouteData2TopicSubscribeInfo``, ``findBrokerAddressInPublish``) and
:class:`TopicPublishInfo` (round-robin queue selection avoiding the broker that just failed, as
``TopicPublishInfo.selectOneMessageQueue``). The NameServer is picked at random and kept until it
fails (client-flows.md section 1). Must not: run timers (its owner calls :meth:`refresh_all` every
``pollNameServerInterval``).

A failure on a broker (refused or closed connection, a "not master"/"not available" answer) makes
the client re-fetch that topic's route at once (:meth:`refresh_after_failure`: callers share one
fetch, at most one every 100 ms) instead of at the next 30 s poll, and sets the broker aside for a
second (:meth:`isolate`; ``LatencyFaultTolerance``'s isolation) so queue selection prefers the
others. A route whose broker has no master drops that broker's queues: the dead address is never
kept.

A send to a topic the NameServer does not know uses the route of ``TBW102`` with
``min(4, readQueueNums)`` queues per broker (client-flows.md section 2.1); that route is replaced by
the real one on the next refresh.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from typing import Final, Protocol

import structlog

from rocketpy.client.admin import TopicRoute, parse_route, split_namesrv_addr
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ClientError, ConnectionClosed, RemoteError, RequestTimeout
from rocketpy.remoting.protocol.body.broker import MessageQueue
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import to_ext
from rocketpy.remoting.protocol.headers.namesrv import GetRouteInfoRequestHeader
from rocketpy.remoting.transport.client import RemotingClient

DEFAULT_TOPIC: Final = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4
MASTER_ID: Final = 0
PERM_WRITE: Final = 0x2
PERM_READ: Final = 0x4
#: A topic's route is re-fetched after a failure at most this often.
REFRESH_AFTER_FAILURE_S: Final = 0.1
#: How long a broker that failed is set aside by queue selection.
ISOLATION_S: Final = 1.0

log = structlog.get_logger(__name__)


class TopicPublishInfo:
    """The writable master queues of one topic, with the round-robin position."""

    __slots__ = ("_index", "broker_addrs", "from_default", "queues", "topic")

    def __init__(
        self,
        topic: str,
        queues: tuple[MessageQueue, ...],
        broker_addrs: dict[str, str],
        *,
        from_default: bool = False,
    ) -> None:
        self.topic = topic
        self.queues = queues
        #: brokerName -> master address.
        self.broker_addrs = broker_addrs
        #: built from TBW102's route: the broker creates the topic on the first send.
        self.from_default = from_default
        self._index = random.randrange(1 << 16)  # noqa: S311 - load spreading, not security

    def select(
        self, last_broker: str | None = None, isolated: dict[str, float] | None = None
    ) -> MessageQueue:
        """The next queue; on a retry, one of another broker if there is one; and one of a
        broker not in ``isolated`` (broker name -> monotonic time it is set aside until) when
        there is one."""
        queues = self.queues
        n = len(queues)
        if last_broker is not None or isolated:
            now = time.monotonic() if isolated else 0.0
            for _ in range(n):
                self._index += 1
                mq = queues[self._index % n]
                name = mq.broker_name
                if name != last_broker and (not isolated or isolated.get(name, 0.0) <= now):
                    return mq
        self._index += 1
        return queues[self._index % n]


def _publish_info(topic: str, route: TopicRoute, *, from_default: bool) -> TopicPublishInfo:
    masters = {
        b.broker_name: b.broker_addrs[MASTER_ID]
        for b in route.brokers
        if MASTER_ID in b.broker_addrs
    }
    queues: list[MessageQueue] = []
    for q in sorted(route.queues, key=lambda q: q.broker_name):
        if q.perm & PERM_WRITE and q.broker_name in masters:
            nums = q.write_queue_nums
            if from_default:
                nums = min(DEFAULT_TOPIC_QUEUE_NUMS, q.read_queue_nums)
            queues += [
                MessageQueue(topic=topic, broker_name=q.broker_name, queue_id=i)
                for i in range(nums)
            ]
    return TopicPublishInfo(topic, tuple(queues), masters, from_default=from_default)


def _subscribe_queues(topic: str, route: TopicRoute) -> tuple[MessageQueue, ...]:
    out = [
        MessageQueue(topic=topic, broker_name=q.broker_name, queue_id=i)
        for q in route.queues
        if q.perm & PERM_READ
        for i in range(q.read_queue_nums)
    ]
    return tuple(sorted(out))


class Invoke(Protocol):
    """A request-response call to one address (``RemotingClient.invoke`` and the proxy's
    transports alike)."""

    async def __call__(
        self, addr: str, request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand: ...


class NoNameServerAnswered(ClientError):
    """Every NameServer was tried once and none answered; ``last`` is the last failure."""

    def __init__(self, last: ConnectionClosed | RequestTimeout | None) -> None:
        super().__init__(f"no name server answered: {last}")
        self.last = last


class RouteFetcher:
    """GET_ROUTEINFO_BY_TOPIC from the NameServers of one ``namesrvAddr``: the one that answered
    last is asked first, and one that is down or slow is passed for the next (client-flows.md
    section 1). Shared by the client's :class:`TopicRouteCache` and the proxy's Cluster mode.

    Args:
        invoke: sends a request to an address and awaits its response.
        namesrvs: the NameServer addresses (:func:`split_namesrv_addr`).
        timeout_s: per request.
        start: index of the NameServer asked first.
    """

    def __init__(
        self, invoke: Invoke, namesrvs: Sequence[str], timeout_s: float, start: int = 0
    ) -> None:
        self._invoke = invoke
        self._namesrvs = tuple(namesrvs)
        self._index = start
        self._timeout_s = timeout_s

    async def fetch(self, topic: str) -> TopicRoute | None:
        """The route of ``topic``; None when the NameServers do not know it.

        Raises:
            RemoteError: a NameServer answered with another failure code.
            NoNameServerAnswered: none answered in time.
        """
        last: ConnectionClosed | RequestTimeout | None = None
        ext = to_ext(GetRouteInfoRequestHeader(topic=topic))
        for _ in range(len(self._namesrvs)):
            addr = self._namesrvs[self._index % len(self._namesrvs)]
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
            try:
                response = await self._invoke(addr, request, self._timeout_s)
            except (ConnectionClosed, RequestTimeout) as e:
                last = e
                self._index += 1
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
            if response.code != ResponseCode.SUCCESS:
                raise RemoteError.for_code(response.code, response.remark or "")
            return parse_route(response.body or b"{}")
        raise NoNameServerAnswered(last) from last


class TopicRouteCache:
    """Routes fetched from the NameServers, by topic, and every broker address seen."""

    def __init__(
        self, remoting: RemotingClient, namesrv_addr: str, *, timeout_s: float = 3.0
    ) -> None:
        self._remoting = remoting
        namesrvs = split_namesrv_addr(namesrv_addr)
        if not namesrvs:
            raise ClientError("no name server address given")
        start = random.randrange(len(namesrvs))  # noqa: S311
        self._fetcher = RouteFetcher(remoting.invoke, namesrvs, timeout_s, start)
        #: topic -> publish info; the send hot path reads this dict directly.
        self.publish: dict[str, TopicPublishInfo] = {}
        #: topic -> readable queues (sorted), for consumers.
        self.subscribe: dict[str, tuple[MessageQueue, ...]] = {}
        #: brokerName -> {brokerId: address}, merged from every route fetched.
        self.brokers: dict[str, dict[int, str]] = {}
        #: brokerName -> monotonic time until which queue selection avoids it.
        self.isolated: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # topic -> the fetch a failure started (others await it), and when the last ended.
        self._refreshing: dict[str, asyncio.Future[None]] = {}
        self._refreshed_at: dict[str, float] = {}

    async def _fetch(self, topic: str) -> TopicRoute | None:
        """The route from the NameServers, its broker addresses merged; None when unknown."""
        route = await self._fetcher.fetch(topic)
        if route is not None:
            for b in route.brokers:
                self.brokers[b.broker_name] = dict(b.broker_addrs)
        return route

    async def update(self, topic: str) -> bool:
        """Fetch ``topic``'s route and update the tables; False when the topic is unknown (the
        entries for it are kept, as Java keeps its last route)."""
        route = await self._fetch(topic)
        if route is None:
            return False
        self.subscribe[topic] = _subscribe_queues(topic, route)
        # Replaced even without a writable queue: a broker whose master is gone has no
        # queues, rather than the dead master's address (Java replaces it the same way).
        self.publish[topic] = _publish_info(topic, route, from_default=False)
        return True

    async def refresh_after_failure(self, topic: str) -> None:
        """Re-fetch ``topic``'s route now, after a failure on one of its brokers: concurrent
        callers share one fetch, and one that ended less than 100 ms ago is not repeated.
        Never raises for a NameServer that fails (the 30 s poll stays the fallback)."""
        pending = self._refreshing.get(topic)
        if pending is not None:
            await asyncio.shield(pending)
            return
        loop = asyncio.get_running_loop()
        if loop.time() - self._refreshed_at.get(topic, float("-inf")) < REFRESH_AFTER_FAILURE_S:
            return
        done: asyncio.Future[None] = loop.create_future()
        self._refreshing[topic] = done
        try:
            await self.update(topic)
        except (ClientError, RemoteError) as e:
            log.warning("updateTopicRouteInfoFromNameServer failed", topic=topic, error=str(e))
        finally:
            self._refreshed_at[topic] = loop.time()
            del self._refreshing[topic]
            done.set_result(None)

    def isolate(self, broker_name: str) -> None:
        """Set ``broker_name`` aside for :data:`ISOLATION_S` (a send to it just failed)."""
        now = time.monotonic()
        for name in [n for n, until in self.isolated.items() if until <= now]:
            del self.isolated[name]
        self.isolated[broker_name] = now + ISOLATION_S

    async def publish_info(self, topic: str) -> TopicPublishInfo:
        """The publish queues of ``topic``, fetched on first use (TBW102 when unknown).

        Raises:
            ClientError: neither the topic nor TBW102 has a route with writable master queues.
        """
        info = self.publish.get(topic)
        if info is not None and info.queues:
            return info
        lock = self._locks.setdefault(topic, asyncio.Lock())
        async with lock:
            info = self.publish.get(topic)
            if info is None or not info.queues:
                if not await self.update(topic):
                    default = await self._fetch(DEFAULT_TOPIC)
                    if default is not None:
                        self.publish[topic] = _publish_info(topic, default, from_default=True)
                info = self.publish.get(topic)
        if info is None or not info.queues:
            raise ClientError(f"No route info of this topic: {topic}")
        return info

    async def subscribe_queues(self, topic: str) -> tuple[MessageQueue, ...]:
        """The readable queues of ``topic`` (fetched when not cached).

        Raises:
            ClientError: the topic is unknown to the NameServer.
        """
        queues = self.subscribe.get(topic)
        if queues is None:
            if not await self.update(topic):
                raise ClientError(f"Can not find Message Queue for this topic, {topic}")
            queues = self.subscribe[topic]
        return queues

    async def refresh_all(self) -> None:
        """Re-fetch every topic in use (the 30 s ``pollNameServerInterval`` task)."""
        for topic in sorted(set(self.publish) | set(self.subscribe)):
            try:
                await self.update(topic)
            except (ClientError, RemoteError) as e:
                log.warning("updateTopicRouteInfoFromNameServer failed", topic=topic, error=str(e))

    def master_addr(self, broker_name: str) -> str | None:
        """The master address of ``broker_name``, if known."""
        return self.brokers.get(broker_name, {}).get(MASTER_ID)

    def any_addr(self, broker_name: str) -> str | None:
        """The master address, else the lowest-id replica (``findBrokerAddressInSubscribe``)."""
        addrs = self.brokers.get(broker_name)
        if not addrs:
            return None
        return addrs.get(MASTER_ID) or addrs[min(addrs)]

    def all_broker_addrs(self, *, masters_only: bool = False) -> list[str]:
        """Every known broker address (heartbeat targets)."""
        out: list[str] = []
        for addrs in self.brokers.values():
            for broker_id, addr in sorted(addrs.items()):
                if not masters_only or broker_id == MASTER_ID:
                    out.append(addr)
        return out
