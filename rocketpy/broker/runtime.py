"""BrokerRuntime: the components processors and background services share.

Owns: nothing but references, wired by ``service.py`` (upstream passes ``BrokerController`` to
every processor; this is the same idea without the controller's life cycle). Must not: start or
stop anything.
"""

from __future__ import annotations

import os
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rocketpy.broker.client_manager import ConsumerManager, ProducerManager
from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.metrics import BrokerMetrics, stats_item_values
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.rebalance_lock import RebalanceLockManager
from rocketpy.broker.request_gate import RequestGate
from rocketpy.broker.stats import BrokerStats
from rocketpy.broker.store_api import BrokerStore
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.message.client_id import UniqIdGenerator
from rocketpy.remoting.protocol.body.broker import LockBatchRequestBody, MessageQueue
from rocketpy.remoting.protocol.body.config_shapes import PERM_READ, PERM_WRITE
from rocketpy.store.commit_log.put_types import MessageToStore, PutResult

#: Upper bound of a single pull's bytes when the client sends no ``maxMsgBytes`` (16 MiB frame).
DEFAULT_PULL_MAX_BYTES = 8 * 1024 * 1024


def _noop() -> None:
    return None


@dataclass(slots=True, kw_only=True, eq=False)
class BrokerRuntime:
    """Shared broker state. ``store_host`` is set once the listener is bound."""

    config: BrokerConfig
    store: BrokerStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    producers: ProducerManager
    locks: RebalanceLockManager
    max_message_size: int = 4 * 1024 * 1024
    max_delay_level: int = 18
    is_slave: bool = False
    default_query_max_num: int = 32
    clock: Clock = SYSTEM_CLOCK
    store_host: tuple[str, int] = ("127.0.0.1", 0)
    #: Ask the outer API to re-register with the NameServers now (topic created or changed).
    register_now: Callable[[], None] = _noop
    #: Slave acting master: puts a message this slave must not write on another set's master
    #: (``EscapeBridge.putMessage``); None when ``enableSlaveActingMaster`` is off.
    escape: Callable[[MessageToStore], Awaitable[PutResult]] | None = None
    #: ``lockInStrictMode``: the queues each other live member of the set locked for a
    #: LOCK_BATCH_MQ body (``lockBatchMQAsync``); None when ``enableSlaveActingMaster`` is off
    #: (no member group is known).
    lock_on_replicas: (
        Callable[[LockBatchRequestBody], Awaitable[list[tuple[MessageQueue, ...]]]] | None
    ) = None
    #: ``totalReplicas`` of the set: strict-mode locks need ``totalReplicas // 2 + 1`` members.
    total_replicas: int = 1
    #: DLedger CommitLog mode: a slave refuses pulls unless ``slaveReadEnable`` (upstream's
    #: ``PullMessageProcessor.rejectRequest``); other modes serve them and redirect.
    reject_slave_pulls: bool = False
    stats: BrokerStats = field(default_factory=BrokerStats)
    #: Per-topic/queue counters and histograms for metrics dumps and Prometheus.
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    #: Request gates by family name (``send``, ``pull``, ...), for runtime info.
    gates: dict[str, RequestGate] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)
    uniq_ids: UniqIdGenerator = field(
        default_factory=lambda: UniqIdGenerator("127.0.0.1", os.getpid(), random.getrandbits(32))
    )

    @property
    def broker_writable(self) -> bool:
        """``PermName.isWriteable(brokerPermission)``."""
        return bool(self.config.broker_permission & PERM_WRITE)

    @property
    def broker_readable(self) -> bool:
        """``PermName.isReadable(brokerPermission)``."""
        return bool(self.config.broker_permission & PERM_READ)

    async def sample_stats(self) -> None:
        """The once-a-second sample of the stats counters and the per-item figures."""
        self.stats.sample()
        self.stats.items.sample(self.clock.monotonic_ms(), stats_item_values(self.metrics))
