"""The services only a master runs, and the re-put they share.

Owns: :class:`MasterServices` (the schedule and transaction check services and the timer store
started and stopped as one ``SpecialService``: at a master's start, on a controller-mode role
change, or as the acting master of slave-acting-master mode), :class:`MasterReput` (how a due
delayed or timer message is stored: into this broker's store, or escaped to another group's
master while this slave acts) and :func:`build_timer` (the timer store, the send path's timer
hook and the GET_TIMER_CHECK_POINT/GET_TIMER_METRICS processor of one broker). Mirrors the
master-only parts of ``BrokerController.startBasicService``/``changeSpecialServiceStatus`` and
the timer wiring of ``BrokerController.initialize``. Must not: decide roles
(``controller_setup.py``, ``acting_master.py`` do).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from rocketpy.broker.processors.send import SendMessageProcessor
from rocketpy.broker.processors.timer import TimerProcessor
from rocketpy.broker.request_gate import RequestGate, gated
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.schedule import ScheduleMessageService
from rocketpy.broker.store_api import BrokerStore
from rocketpy.broker.timer_hook import TimerHook
from rocketpy.broker.timer_store import TimerMessageStore
from rocketpy.common.clock import Clock
from rocketpy.remoting.transport.dispatch import ProcessorRegistry
from rocketpy.store.commit_log.put_types import MessageToStore, PutResult
from rocketpy.store.config import MessageStoreConfig


class MasterServices:
    """The master's services (``others``: the schedule and transaction check services, as
    ``transaction/setup.py`` starts them) and the timer store, as one start/stop."""

    def __init__(
        self, schedule: ScheduleMessageService, others: Service, timer: TimerMessageStore | None
    ) -> None:
        """Args: ``schedule`` delay levels (loaded here); ``others`` what else a master runs,
        schedule included; ``timer`` the timer store (None when disabled)."""
        self.schedule = schedule
        self.others = others
        self.timer = timer

    async def load(self) -> None:
        """Read ``delayOffset.json``; open and recover the timer files (broker start)."""
        await self.schedule.load()
        if self.timer is not None:
            await self.timer.load()

    async def start(self) -> None:
        """Start them all."""
        await self.others.start()
        if self.timer is not None:
            await self.timer.start()

    async def stop(self) -> None:
        """Stop them all (idempotent)."""
        if self.timer is not None:
            await self.timer.stop()
        await self.others.stop()

    async def close(self) -> None:
        """Stop both and close the timer files (broker stop)."""
        await self.stop()
        if self.timer is not None:
            await self.timer.close()


class Service(Protocol):
    """A service started on a master and stopped when it no longer is one."""

    async def start(self) -> None:
        """Start it."""
        ...

    async def stop(self) -> None:
        """Stop it (idempotent)."""
        ...


class MasterReput:
    """Stores a due message (``ScheduleMessageService``/``TimerMessageStore``'s put)."""

    def __init__(
        self,
        rt: BrokerRuntime,
        store: BrokerStore,
        escape: Callable[[], Callable[[MessageToStore], Awaitable[PutResult]] | None],
    ) -> None:
        """Args: ``rt`` the broker state (role, stats); ``store`` where it is stored;
        ``escape`` the acting-master escape put (None outside that mode)."""
        self._rt = rt
        self._store = store
        self._escape = escape

    async def __call__(self, msg: MessageToStore) -> PutResult:
        """Store ``msg`` and count it; an acting slave escapes it to a live master."""
        escape = self._escape()
        if escape is not None and self._rt.is_slave:
            return await escape(msg)
        result = await self._store.put_message(msg)
        if result.stored:
            self._rt.stats.inc_put()
            self._rt.metrics.record_put(msg.topic, msg.queue_id, len(msg.body))
        return result


def build_timer(
    store_config: MessageStoreConfig,
    *,
    rt: BrokerRuntime,
    store: BrokerStore,
    reput: MasterReput,
    send: SendMessageProcessor,
    registry: ProcessorRegistry,
    clock: Clock,
    on_failure: Callable[[BaseException], None],
) -> TimerMessageStore | None:
    """The broker's timer store (None with ``timerWheelEnable=false``, whose timer messages
    the hook then refuses), its send hook and its two admin codes (behind the admin gate)."""
    timer = None
    if store_config.timer_wheel_enable:
        timer = TimerMessageStore(
            store, store_config, reput=reput, clock=clock, on_failure=on_failure
        )
    send.route.timer_hook = TimerHook(store_config, is_reject=timer.is_reject if timer else None)
    admin: RequestGate = rt.gates["admin"]
    for code, handler in TimerProcessor(timer).handlers().items():
        registry.register(code, gated(admin, handler))
    return timer
