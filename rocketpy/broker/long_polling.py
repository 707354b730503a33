"""PullRequestHoldService: parks pulls that found nothing until a message arrives or they expire.

Owns: the suspended PULL_MESSAGE requests per ``topic@queueId``, their deadlines, and waking
them: :meth:`notify_message_arriving` (called by the store's reput notification for every
dispatched message, and by the periodic check with the queue's max offset) re-runs a request
whose queue now has data past its offset and matching its filter; a request whose
``suspendTimeoutMillis`` passed is re-run once more and answered with whatever it yields
(usually PULL_NOT_FOUND). Mirrors ``broker/longpolling/PullRequestHoldService`` and
``ManyPullRequest`` (client-flows.md section 4.3).

Difference from upstream, on purpose: each request also gets a loop timer at its own deadline, so
an expired pull is answered on time instead of at the next 5 s check.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import structlog

from rocketpy.broker.filter import matches_tags_code
from rocketpy.common.aio import TaskSet, periodic
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.remoting.protocol.body.heartbeat import SubscriptionData
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import RequestContext

log = structlog.get_logger(__name__)

#: Re-runs a woken request without suspension and writes its response.
WakeUp = Callable[[RequestContext, RemotingCommand], Coroutine[Any, Any, None]]


@dataclass(slots=True, eq=False)
class PullRequest:
    """One parked pull (``PullRequest``)."""

    ctx: RequestContext
    request: RemotingCommand
    topic: str
    queue_id: int
    pull_from_this_offset: int
    subscription: SubscriptionData | None
    deadline_ms: int
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class PullRequestHoldService:
    """Holds suspended pulls; woken by message arrival, periodic checks and deadlines."""

    def __init__(
        self,
        *,
        max_offset: Callable[[str, int], int],
        wake_up: WakeUp,
        check_interval_ms: int = 5_000,
        clock: Clock = SYSTEM_CLOCK,
        name: str = "broker/pull-hold",
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Args: ``max_offset(topic, queue_id)`` the queue's current max offset; ``wake_up``
        re-runs a request; ``check_interval_ms`` period of the safety check (5 s with long
        polling, ``shortPollingTimeMills`` without); ``clock`` monotonic time; ``name`` of the
        tasks; ``on_failure`` is told when the check loop dies of a bug."""
        self._max_offset = max_offset
        self._wake_up = wake_up
        self._check_interval_ms = check_interval_ms
        self._clock = clock
        self._name = name
        self._table: dict[tuple[str, int], list[PullRequest]] = {}
        self._tasks = TaskSet(f"{name}/wake")
        self._stop = asyncio.Event()
        self._checker: asyncio.Task[None] | None = None
        self._on_failure = on_failure

    def __len__(self) -> int:
        return sum(len(v) for v in self._table.values())

    async def start(self) -> None:
        """Start the periodic check."""
        self._stop.clear()
        self._checker = asyncio.get_running_loop().create_task(
            periodic(
                self._check_interval_ms / 1000,
                self._check_all,
                stop=self._stop,
                name=f"{self._name}/check",
            ),
            name=f"{self._name}/check",
        )
        self._checker.add_done_callback(self._checker_done)

    def _checker_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("pull hold check failed", exc_info=exc)
            if self._on_failure is not None:
                self._on_failure(exc)

    async def stop(self) -> None:
        """Answer nothing more: drop parked requests (their clients time out and retry
        elsewhere) and stop the tasks. Idempotent."""
        self._stop.set()
        for requests in self._table.values():
            for req in requests:
                if req.timer is not None:
                    req.timer.cancel()
        self._table.clear()
        if self._checker is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._checker
            self._checker = None
        await self._tasks.cancel_all()

    def wake_all(self) -> None:
        """Re-run every parked request now (shutdown: answer them instead of dropping them)."""
        parked = [req for requests in self._table.values() for req in requests]
        self._table.clear()
        for req in parked:
            self._run(req)

    async def wait_woken(self, timeout_s: float) -> None:
        """Wait (bounded) until every woken request has been answered."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while len(self._tasks):  # noqa: ASYNC110 - a handful of short tasks
                    await asyncio.sleep(0.01)

    def suspend(self, req: PullRequest) -> None:
        """``suspendPullRequest``: park ``req`` until data arrives or its deadline."""
        if self._stop.is_set():
            return
        key = (req.topic, req.queue_id)
        self._table.setdefault(key, []).append(req)
        delay_s = max(0, req.deadline_ms - self._clock.monotonic_ms()) / 1000
        req.timer = asyncio.get_running_loop().call_later(delay_s, self._expire, req)

    async def _check_all(self) -> None:
        """``checkHoldRequest``: re-check every parked queue against its max offset."""
        for topic, queue_id in list(self._table):
            self.notify_message_arriving(topic, queue_id, self._max_offset(topic, queue_id))

    def _expire(self, req: PullRequest) -> None:
        key = (req.topic, req.queue_id)
        parked = self._table.get(key)
        if parked is None or req not in parked:
            return
        parked.remove(req)
        if not parked:
            del self._table[key]
        self._run(req)

    def _run(self, req: PullRequest) -> None:
        if req.timer is not None:
            req.timer.cancel()
            req.timer = None
        if req.ctx.channel.is_closed:
            return
        self._tasks.spawn(self._wake_up(req.ctx, req.request), name=f"{self._name}/wake")

    def notify_message_arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None
    ) -> None:
        """``notifyMessageArriving``: wake the requests of this queue that now have data
        (filtered by ``tags_code`` when given) or that passed their deadline."""
        parked = self._table.pop((topic, queue_id), None)
        if not parked:
            return
        keep: list[PullRequest] = []
        now = self._clock.monotonic_ms()
        for req in parked:
            newest = max_offset
            if newest <= req.pull_from_this_offset:
                newest = self._max_offset(topic, queue_id)
            arrived = newest > req.pull_from_this_offset and matches_tags_code(
                req.subscription, tags_code
            )
            if arrived or now >= req.deadline_ms:
                self._run(req)
            else:
                keep.append(req)
        if keep:
            self._table.setdefault((topic, queue_id), []).extend(keep)
