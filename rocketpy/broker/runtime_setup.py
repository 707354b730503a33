"""Builds a broker's :class:`~rocketpy.broker.runtime.BrokerRuntime`: its metadata managers
(topics, subscription groups, consumer offsets, client channels, rebalance locks) over one store
root, executor and clock.

Owns: which settings each manager takes (``BrokerController``'s constructor builds the same
managers). Must not: load their files or start anything (``BrokerService`` does, in order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from rocketpy.broker.client_manager import ConsumerManager, ProducerManager
from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.rebalance_lock import RebalanceLockManager
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.store_api import BrokerStore
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.common.clock import Clock
from rocketpy.remoting.transport.dispatch import Channel


@dataclass(frozen=True, slots=True)
class RuntimeHooks:
    """What the service wants to hear from the managers it does not own the logic of.

    Attributes:
        state_version: the controller's master epoch for topic DataVersions, else 0.
        topics_changed: a topic was created, changed or deleted (re-register).
        groups_changed: a subscription group was changed.
        ids_changed: a consumer group's channels changed (notify its consumers).
        register_now: re-register with the NameServers at once.
    """

    state_version: Callable[[], int]
    topics_changed: Callable[[], None]
    groups_changed: Callable[[], None]
    ids_changed: Callable[[str, Sequence[Channel]], None]
    register_now: Callable[[], None]


def build_runtime(
    config: BrokerConfig,
    store: BrokerStore,
    store_root: Path,
    *,
    executor: Executor,
    clock: Clock,
    limits: tuple[int, int],
    is_slave: bool,
    hooks: RuntimeHooks,
) -> BrokerRuntime:
    """The runtime of one broker with fresh managers (nothing loaded yet).

    Args:
        limits: ``(max message size, highest delay level)``.
    """
    max_message_size, max_delay_level = limits
    return BrokerRuntime(
        config=config,
        store=store,
        topics=TopicConfigManager(
            config, store_root, executor=executor, clock=clock,
            state_version=hooks.state_version, on_change=hooks.topics_changed,
        ),
        groups=SubscriptionGroupManager(
            config, store_root, executor=executor, clock=clock, on_change=hooks.groups_changed
        ),
        offsets=ConsumerOffsetManager(
            store_root, executor=executor, clock=clock,
            version_step=config.consumer_offset_update_version_step,
        ),
        consumers=ConsumerManager(
            channel_expired_timeout_ms=config.channel_expired_timeout_ms, clock=clock,
            on_ids_changed=hooks.ids_changed,
        ),
        producers=ProducerManager(
            channel_expired_timeout_ms=config.channel_expired_timeout_ms, clock=clock
        ),
        locks=RebalanceLockManager(
            max_live_time_ms=config.rebalance_lock_max_live_time_ms, clock=clock
        ),
        max_message_size=max_message_size,
        max_delay_level=max_delay_level,
        default_query_max_num=config.default_query_max_num,
        is_slave=is_slave,
        clock=clock,
        register_now=hooks.register_now,
    )  # fmt: skip
