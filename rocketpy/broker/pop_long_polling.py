"""PopLongPollingService: parks POP_MESSAGE (and NOTIFICATION) requests that found nothing until
a message arrives on the topic, its pop retry topic, or the request's ``pollTime`` ends.

Owns: the parked requests per polling key ``topic@group@queueId`` (``KeyBuilder.buildPollingKey``;
queue id -1 for a broker-wide pop), the ``popPollingSize`` per key and ``maxPopPollingSize``
total caps (POLLING_FULL beyond), one loop timer per request at its deadline, and waking: the
store's arrival listener calls :meth:`notify_message_arriving` for every dispatched message; a
parked pop of topic ``T`` for group ``G`` is woken by messages of ``T`` (on its queue or any queue
for -1, if the tag matches) and of ``%RETRY%G_T``. A woken request is re-run without suspension
and answered on its connection. Mirrors ``broker/longpolling/PopLongPollingService`` (5.3.x).
Must not: read the store; the processor does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import structlog

from rocketpy.broker.filter import matches_tags_code
from rocketpy.common.aio import TaskSet
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.remoting.protocol.body.heartbeat import SubscriptionData
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import RequestContext

log = structlog.get_logger(__name__)

#: Re-runs a woken request without suspension and writes its response.
WakeUp = Callable[[RequestContext, RemotingCommand], Coroutine[Any, Any, None]]


@dataclass(slots=True, eq=False)
class PopRequest:
    """One parked POP (``PopRequest``). ``topics`` are the topics whose arrivals wake it: the
    topic itself and the group's pop retry topic."""

    ctx: RequestContext
    request: RemotingCommand
    topic: str
    group: str
    queue_id: int
    retry_topic: str
    subscription: SubscriptionData | None
    deadline_ms: int
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        """``buildPollingKey``."""
        return f"{self.topic}@{self.group}@{self.queue_id}"


class PopLongPollingService:
    """Parked POPs, woken by arrivals and deadlines."""

    def __init__(
        self,
        *,
        wake_up: WakeUp,
        polling_size: int,
        max_polling_size: int,
        clock: Clock = SYSTEM_CLOCK,
        name: str = "broker/pop-polling",
    ) -> None:
        """Args: ``wake_up`` re-runs a request; ``polling_size`` the cap per key
        (``popPollingSize``); ``max_polling_size`` the total cap (``maxPopPollingSize``);
        ``clock`` monotonic time; ``name`` of the tasks."""
        self._wake_up = wake_up
        self._polling_size = polling_size
        self._max_polling_size = max_polling_size
        self._clock = clock
        self._name = name
        self._by_key: dict[str, list[PopRequest]] = {}
        #: watched topic -> parked requests it wakes
        self._by_topic: dict[str, list[PopRequest]] = {}
        self._total = 0
        self._stopped = False
        self._tasks = TaskSet(f"{name}/wake")

    def __len__(self) -> int:
        return self._total

    def polling_num(self, topic: str, group: str, queue_id: int) -> int:
        """POLLING_INFO: how many requests are parked under the key."""
        return len(self._by_key.get(f"{topic}@{group}@{queue_id}", ()))

    def polling(self, req: PopRequest) -> bool | None:
        """``polling``: park ``req``. Returns True when parked, False when full (POLLING_FULL),
        None when it cannot be parked (stopped, or its deadline already passed)."""
        if self._stopped or req.deadline_ms <= self._clock.monotonic_ms():
            return None
        parked = self._by_key.setdefault(req.key, [])
        if len(parked) >= self._polling_size or self._total >= self._max_polling_size:
            if not parked:
                del self._by_key[req.key]
            return False
        parked.append(req)
        for topic in (req.topic, req.retry_topic):
            self._by_topic.setdefault(topic, []).append(req)
        self._total += 1
        delay_s = max(0, req.deadline_ms - self._clock.monotonic_ms()) / 1000
        req.timer = asyncio.get_running_loop().call_later(delay_s, self._fire, req)
        return True

    def notify_message_arriving(
        self, topic: str, queue_id: int, _max_offset: int = 0, tags_code: int | None = None
    ) -> None:
        """The store's arrival listener: wake the requests this message may satisfy."""
        watchers = self._by_topic.get(topic)
        if not watchers:
            return
        for req in list(watchers):
            if topic == req.topic:
                if req.queue_id not in (-1, queue_id):
                    continue
                if not matches_tags_code(req.subscription, tags_code):
                    continue
            self._fire(req)

    def notify_key(self, topic: str, group: str, queue_id: int) -> None:
        """Wake one parked request of a key (a pop left messages behind: ``restNum > 0``)."""
        parked = self._by_key.get(f"{topic}@{group}@{queue_id}")
        if parked:
            self._fire(parked[0])

    def _remove(self, req: PopRequest) -> bool:
        parked = self._by_key.get(req.key)
        if parked is None or req not in parked:
            return False
        parked.remove(req)
        if not parked:
            del self._by_key[req.key]
        for topic in (req.topic, req.retry_topic):
            watchers = self._by_topic.get(topic)
            if watchers is not None and req in watchers:
                watchers.remove(req)
                if not watchers:
                    del self._by_topic[topic]
        self._total -= 1
        if req.timer is not None:
            req.timer.cancel()
            req.timer = None
        return True

    def _fire(self, req: PopRequest) -> None:
        if not self._remove(req) or req.ctx.channel.is_closed:
            return
        self._tasks.spawn(self._wake_up(req.ctx, req.request), name=f"{self._name}/wake")

    def wake_all(self) -> None:
        """Shutdown: answer every parked request now."""
        for requests in list(self._by_key.values()):
            for req in list(requests):
                self._fire(req)

    async def stop(self) -> None:
        """Drop what is still parked and cancel the wake-up tasks. Idempotent."""
        self._stopped = True
        for requests in list(self._by_key.values()):
            for req in list(requests):
                self._remove(req)
        await self._tasks.cancel_all()
