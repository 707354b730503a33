"""ActingMasterSetup: wires slave-acting-master mode into one broker.

Owns: building the :class:`ActingMasterService`, the :class:`EscapeBridge`, the
:class:`BrokerPreOnlineService` and the 905/906 processor over a broker's components, and their
start/stop. ``service.py`` creates one when ``enableSlaveActingMaster=true`` and calls
:meth:`start` where a plain broker registers, :meth:`stop` before it stops its schedule service.
Mirrors the ``enableSlaveActingMaster`` branches of ``BrokerController.initialize``/``start``.
Must not: hold state of its own beyond the objects it built.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from rocketpy.broker.acting_api import ActingMasterAPI
from rocketpy.broker.acting_master import ActingMasterService, SpecialService
from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.escape_bridge import EscapeBridge
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.pre_online import BrokerPreOnlineService
from rocketpy.broker.processors.acting_master import ActingMasterProcessor
from rocketpy.broker.schedule import ScheduleMessageService
from rocketpy.common.errors import RemotingError
from rocketpy.ha.classic.service import DefaultHAService
from rocketpy.ha.config import HAConfig
from rocketpy.remoting.protocol.body.broker import LockBatchRequestBody, MessageQueue
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.dispatch import ProcessorRegistry
from rocketpy.store.commit_log.put_types import MessageToStore, PutResult

log = structlog.get_logger(__name__)


class ActingMasterSetup:
    """The acting-master pieces of one broker."""

    def __init__(
        self,
        *,
        config: Callable[[], BrokerConfig],
        client: RemotingClient,
        registry: ProcessorRegistry,
        ha_config: HAConfig | None,
        ha: Callable[[], DefaultHAService | None],
        schedule: ScheduleMessageService,
        special: SpecialService | None = None,
        offsets: ConsumerOffsetManager,
        address: Callable[[], str],
        ha_server_addr: Callable[[], str],
        max_phy_offset: Callable[[], int],
        register: Callable[[], Awaitable[None]],
    ) -> None:
        """Build everything; register the 905/906 processor in ``registry``.

        Args:
            config: the broker's current settings (UPDATE_BROKER_CONFIG replaces them).
            client: its outbound remoting client (dispatching into ``registry``, so the
                NameServer's oneway 905 on the registration connection reaches the processor).
            registry: where the broker's request processors are registered.
            ha_config: classic HA settings (``totalReplicas``, the housekeeping interval).
            ha: the classic HA service, if the store runs one.
            schedule: the schedule service (its progress is synced back by pre-online).
            special: what the set's minimum-id broker runs (default: ``schedule``; the broker
                passes the schedule, transaction check and timer services together).
            offsets: consumer offsets (synced back by pre-online; an acting change bumps their
                DataVersion).
            address: this broker's ``ip:port`` (the real port once bound).
            ha_server_addr: this broker's HA address as registered.
            max_phy_offset: the commit log's max physical offset.
            register: a forced ``registerBrokerAll``.
        """
        self._config = config
        self._ha_config = ha_config
        self._ha = ha
        self._schedule = schedule
        self._offsets = offsets
        self._address = address
        self._ha_server_addr = ha_server_addr
        self._max_phy_offset = max_phy_offset
        self.api = ActingMasterAPI(client, timeout_ms=config().send_heartbeat_timeout_ms)
        self.acting = ActingMasterService(
            config=config,
            api=self.api,
            address=address,
            total_replicas=ha_config.total_replicas if ha_config is not None else 1,
            special=special or schedule,
            register=register,
            ha=ha,
            on_acting=offsets.bump_data_version,
        )
        self.escape = EscapeBridge(self.api, config)
        self._init_max_offset = 0
        processor = ActingMasterProcessor(
            self.acting,
            broker_id=lambda: config().broker_id,
            ha=ha,
            ha_server_addr=ha_server_addr,
            address=address,
            init_max_offset=lambda: self._init_max_offset,
        )
        for code, handler in processor.handlers().items():
            registry.register(code, handler)
        self.pre_online: BrokerPreOnlineService | None = None

    async def start(self) -> None:
        """After the store, listener and metadata are up: go online (or start pre-online)."""
        self._init_max_offset = self._max_phy_offset()
        await self.acting.start()
        if self.acting.isolated:
            ha_config = self._ha_config
            housekeeping_ms = ha_config.ha_housekeeping_interval_ms if ha_config else 20_000
            self.pre_online = BrokerPreOnlineService(
                config=self._config,
                api=self.api,
                acting=self.acting,
                address=self._address,
                ha_server_addr=self._ha_server_addr,
                ha=self._ha,
                offsets=self._offsets,
                schedule=self._schedule,
                init_max_offset=self._init_max_offset,
                handshake_timeout_s=housekeeping_ms / 1000,
            )
            self.pre_online.start()

    async def stop(self) -> None:
        """Stop pre-online, the loops and the special services. Idempotent."""
        if self.pre_online is not None:
            await self.pre_online.stop()
        await self.acting.stop()

    @property
    def isolated(self) -> bool:
        """Not registered yet (pre-online running)."""
        return self.acting.isolated

    async def lock_on_replicas(self, body: LockBatchRequestBody) -> list[tuple[MessageQueue, ...]]:
        """``lockInStrictMode``: ask every other live member of the set (the member group
        synced from the NameServer) to lock ``body``'s queues for itself only, each within 1 s,
        all within 2 s as upstream's latch; the queue sets the members locked (a member that
        failed or did not answer in time counts as having locked nothing)."""
        me = self._config().broker_id
        peers = [a for i, a in self.acting.member_group.broker_addrs.items() if i != me]
        tasks = [
            asyncio.create_task(self.api.lock_batch_mq(addr, body, 1.0), name=f"lock-mq/{addr}")
            for addr in peers
        ]
        if not tasks:
            return []
        done, pending = await asyncio.wait(tasks, timeout=2.0)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        out = []
        for task in done:
            if isinstance(task.exception(), RemotingError):
                log.warning("lockBatchMQ on a replica failed", error=repr(task.exception()))
                continue
            out.append(task.result())
        return out

    async def escape_put(self, msg: MessageToStore) -> PutResult:
        """Put ``msg`` on another set's master (a slave never writes its own commit log)."""
        return await self.escape.put_message(msg)
