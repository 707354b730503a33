"""TransactionSetup: wires transactional messages into one broker.

Owns: building the :class:`TransactionalMessageService`, the
:class:`TransactionalMessageCheckService` and the END_TRANSACTION processor over a broker's
components, registering END_TRANSACTION behind its own request gate (upstream's
``endTransactionExecutor``: ``endTransactionThreadPoolNums``/``endTransactionPoolQueueCapacity``),
and :class:`MasterServices`, which starts and stops the check service together with the
schedule service wherever a master's services start and stop (``service.py``,
``controller_setup.py``, ``acting_setup.py``). Mirrors the transaction parts of
``BrokerController.initialTransaction``/``registerProcessor``/``changeSpecialServiceStatus``.
Must not: hold state of its own beyond the objects it built.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from rocketpy.broker.processors.end_transaction import EndTransactionProcessor
from rocketpy.broker.processors.send import SendMessageProcessor
from rocketpy.broker.request_gate import RequestGate, gated
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.schedule import ScheduleMessageService
from rocketpy.broker.transaction.check_service import TransactionalMessageCheckService
from rocketpy.broker.transaction.service import TransactionalMessageService
from rocketpy.remoting.transport.dispatch import ProcessorRegistry
from rocketpy.store.commit_log.put_types import MessageToStore, PutResult
from rocketpy.store.config import MessageStoreConfig


class _Service(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class MasterServices:
    """The services only a master runs, started and stopped as one (the schedule service,
    then the transaction check service)."""

    def __init__(self, *services: _Service) -> None:
        """Args: the services, in start order (stopped in reverse)."""
        self._services = services

    async def start(self) -> None:
        """Start every service."""
        for service in self._services:
            await service.start()

    async def stop(self) -> None:
        """Stop every service (idempotent)."""
        for service in reversed(self._services):
            await service.stop()


class TransactionSetup:
    """The transaction pieces of one broker."""

    def __init__(  # noqa: PLR0917 - one positional call from service.py, as the broker orders it
        self,
        rt: BrokerRuntime,
        registry: ProcessorRegistry,
        schedule: ScheduleMessageService,
        send: SendMessageProcessor,
        put: Callable[[MessageToStore], Awaitable[PutResult]],
        store_config: MessageStoreConfig,
    ) -> None:
        """Build everything and register END_TRANSACTION in ``registry``.

        Args:
            rt: the shared broker state.
            registry: the broker's processors.
            schedule: the schedule service (the other master-only service).
            send: the send processor (its delay routing applies to a committed message).
            put: the broker's internal put (counts the message).
            store_config: ``fileReservedTime``.
        """
        cfg = rt.config
        self.service = TransactionalMessageService(
            rt, put=put, file_reserved_time_hours=store_config.file_reserved_time
        )
        #: The check loop; set its ``on_failure`` to stop the broker when it dies of a bug.
        self.check = TransactionalMessageCheckService(rt, self.service)
        #: What a master runs: delayed delivery, then the transaction check.
        self.master = MasterServices(schedule, self.check)
        gate = RequestGate(
            "transaction",
            max_concurrency=cfg.end_transaction_thread_pool_nums,
            max_waiting=cfg.end_transaction_pool_queue_capacity,
        )
        rt.gates[gate.name] = gate
        processor = EndTransactionProcessor(rt, self.service, send.route.schedule_route)
        for code, handler in processor.handlers().items():
            registry.register(code, gated(gate, handler))
