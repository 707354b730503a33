"""PopSetup: wires POP consumption into a broker -- the processors, their request gate, long
polling, the revive service and the orderly-POP table -- so ``service.py`` only calls
:meth:`register`, :meth:`start` and :meth:`stop`.

Owns: the ``pop`` request gate (upstream's pop and ack thread pools), the order of start (load
``consumerOrderInfo.json``, hook the store's arrival listener, start the revive service) and stop
(answer parked pops, stop the revive service, persist the order info). Mirrors the POP part of
``BrokerController`` (``initializeResources``, ``registerProcessor``, ``startBasicService``).
Must not: parse or answer requests itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

import structlog

from rocketpy.broker.order_info import ConsumerOrderInfoManager
from rocketpy.broker.pop_long_polling import PopLongPollingService
from rocketpy.broker.pop_revive import PopReviveService
from rocketpy.broker.processors.ack import AckMessageProcessor
from rocketpy.broker.processors.pop import PopMessageProcessor
from rocketpy.broker.processors.pop_query import PopQueryProcessor
from rocketpy.broker.request_gate import RequestGate, gated, gated_nowait
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.common.aio import periodic
from rocketpy.remoting.protocol import pop as codec
from rocketpy.remoting.transport.dispatch import ProcessorRegistry
from rocketpy.store.commit_log.put_types import MessageToStore, PutResult

log = structlog.get_logger(__name__)


class PopSetup:
    """The broker's POP machinery."""

    def __init__(
        self,
        rt: BrokerRuntime,
        store_root: Path,
        *,
        executor: Executor | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Args: ``rt`` shared broker state; ``store_root`` holds the config files;
        ``executor`` for file work; ``on_failure`` told when a critical loop dies of a bug."""
        self._rt = rt
        self.revive_topic = codec.revive_topic(rt.config.broker_cluster_name)
        self.order_info = ConsumerOrderInfoManager(store_root, executor=executor, clock=rt.clock)
        self.pop = PopMessageProcessor(
            rt, revive_topic=self.revive_topic, put_revive=self._put, order_info=self.order_info
        )
        self.polling = PopLongPollingService(
            wake_up=self.pop.wake_up,
            polling_size=rt.config.pop_polling_size,
            max_polling_size=rt.config.max_pop_polling_size,
            clock=rt.clock,
            name=f"{rt.config.broker_name}/pop-polling",
        )
        self.pop.attach(self.polling)
        self.query = PopQueryProcessor(rt, self.pop)
        self.ack = AckMessageProcessor(
            rt,
            revive_topic=self.revive_topic,
            put_revive=self._put,
            pop=self.pop,
            order_info=self.order_info,
            notify_queue=self.polling.notify_key,
            put_revive_nowait=self._put_nowait,
        )
        self.revive = PopReviveService(
            rt, revive_topic=self.revive_topic, put=self._put, on_failure=on_failure
        )
        self._stop = asyncio.Event()
        self._persist_task: asyncio.Task[None] | None = None

    def register(self, registry: ProcessorRegistry) -> None:
        """Serve the POP codes behind one ``pop`` gate."""
        cfg = self._rt.config
        gate = RequestGate(
            "pop",
            max_concurrency=cfg.pull_message_thread_pool_nums,
            max_waiting=cfg.pull_thread_pool_queue_capacity,
        )
        self._rt.gates["pop"] = gate
        handlers = {**self.pop.handlers(), **self.query.handlers(), **self.ack.handlers()}
        fast = self.ack.nowait_handlers()
        for code, processor in handlers.items():
            nowait = fast.get(code)
            registry.register(
                code,
                gated(gate, processor),
                nowait=None if nowait is None else gated_nowait(gate, nowait, processor),
            )

    async def start(self) -> None:
        """Load the order info, listen for arrivals, start the revive service (it works only
        while the broker is a master). The revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` is a
        built-in topic of :class:`~rocketpy.broker.topic_config.TopicConfigManager`."""
        rt = self._rt
        await self.order_info.load()
        rt.store.add_arrival_listener(self.polling.notify_message_arriving)
        await self.revive.start()
        self._stop.clear()
        self._persist_task = asyncio.get_running_loop().create_task(
            periodic(
                rt.config.flush_consumer_offset_interval_ms / 1000,
                self.order_info.persist_if_dirty,
                stop=self._stop,
                name="persist-order-info",
            ),
            name=f"{rt.config.broker_name}/persist-order-info",
        )

    def wake_all(self) -> None:
        """Shutdown: answer parked pops now."""
        self.polling.wake_all()

    async def stop(self) -> None:
        """Stop polling and revive, persist the order info. Idempotent."""
        self._stop.set()
        await self.polling.stop()
        await self.revive.stop()
        if self._persist_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._persist_task
            self._persist_task = None
            try:
                await self.order_info.persist()
            except OSError:
                log.exception("persist consumerOrderInfo.json failed")

    async def _put(self, msg: MessageToStore) -> PutResult:
        rt = self._rt
        result = await rt.store.put_message(msg)
        if result.stored:
            rt.stats.inc_put()
            rt.metrics.record_put(msg.topic, msg.queue_id, len(msg.body))
        return result

    def _put_nowait(self, msg: MessageToStore) -> PutResult | None:
        """:meth:`_put` when the store appends at once; None (nothing written) otherwise."""
        rt = self._rt
        result = rt.store.put_message_nowait(msg)
        if result is not None and result.stored:
            rt.stats.inc_put()
            rt.metrics.record_put(msg.topic, msg.queue_id, len(msg.body))
        return result
