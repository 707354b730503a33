"""TopicConfigManager: the broker's topic table, its DataVersion and ``config/topics.json``.

Owns: the built-in topics created at start, auto-creation on send (TBW102 inheritance) and on
send-back (``%RETRY%``/``%DLQ%``), admin create/update/delete, and persistence through
:mod:`rocketpy.broker.config_files`. Mirrors ``broker/topic/TopicConfigManager`` (5.3.x; store.md
section 7, client-flows.md section 2.1). Must not: talk to NameServers; a change calls
``on_change``, which the service wires to "persist topics.json and re-register".

Table mutations are synchronous (the loop is the only writer); :meth:`persist` writes a snapshot
off the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import replace
from pathlib import Path

import structlog

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.config_files import ConfigFile, topics_file
from rocketpy.common.attributes import TOPIC_ATTRIBUTES, alter_current_attributes
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.remoting.protocol.body.config_shapes import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketpy.remoting.protocol.pop import revive_topic

log = structlog.get_logger(__name__)

SCHEDULE_TOPIC_QUEUE_NUM = 18


def _noop() -> None:
    return None


class TopicConfigManager:
    """Topic name -> :class:`TopicConfig`, with upstream's creation rules."""

    def __init__(
        self,
        config: BrokerConfig,
        store_root: Path,
        *,
        executor: Executor | None = None,
        clock: Clock = SYSTEM_CLOCK,
        state_version: Callable[[], int] = lambda: 0,
        on_change: Callable[[], None] = _noop,
    ) -> None:
        """Build the table with the built-in topics; :meth:`load` overlays ``topics.json``.

        Args:
            config: broker settings (names, auto-create switches, default queue numbers).
            store_root: ``storePathRootDir``.
            executor: where file work runs.
            clock: wall clock for DataVersion timestamps.
            state_version: the store's state-machine version (controller mode), else 0.
            on_change: called after every change of the table.
        """
        self._config = config
        self._file: ConfigFile[TopicConfigSerializeWrapper] = topics_file(store_root, executor)
        self._clock = clock
        self._state_version = state_version
        self._on_change = on_change
        self._table: dict[str, TopicConfig] = {}
        self._data_version = DataVersion(timestamp=clock.wall_ms())
        self._system_topics: set[str] = set()
        self._init_builtin()

    def _builtin(self, topic: str, queues: int = 16, perm: int = PERM_READ | PERM_WRITE) -> None:
        self._system_topics.add(topic)
        self._table[topic] = TopicConfig(
            topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=perm
        )

    def _init_builtin(self) -> None:
        """``TopicConfigManager.init``; static-topic internals are out of scope."""
        cfg = self._config
        self._builtin(tv.RMQ_SYS_SELF_TEST_TOPIC, 1)
        if cfg.auto_create_topic_enable:
            self._builtin(
                tv.AUTO_CREATE_TOPIC_KEY_TOPIC,
                cfg.default_topic_queue_nums,
                PERM_INHERIT | PERM_READ | PERM_WRITE,
            )
        self._builtin(tv.RMQ_SYS_BENCHMARK_TOPIC, 1024)
        rw = PERM_READ | PERM_WRITE
        cluster_perm = PERM_INHERIT | (rw if cfg.cluster_topic_enable else 0)
        self._builtin(cfg.broker_cluster_name, 16, cluster_perm)
        broker_perm = PERM_INHERIT | (rw if cfg.broker_topic_enable else 0)
        self._builtin(cfg.broker_name, 1, broker_perm)
        self._builtin(tv.RMQ_SYS_OFFSET_MOVED_EVENT, 1)
        self._builtin(tv.RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM)
        if cfg.trace_topic_enable:
            self._builtin(cfg.msg_trace_topic_name, 1)
        self._builtin(f"{cfg.broker_cluster_name}_{tv.REPLY_TOPIC_POSTFIX}", 1)
        self._builtin(tv.RMQ_SYS_TRANS_HALF_TOPIC, 1)
        self._builtin(tv.RMQ_SYS_TRANS_OP_HALF_TOPIC, 1)
        self._builtin(revive_topic(cfg.broker_cluster_name), cfg.revive_queue_num)  # POP

    async def load(self) -> None:
        """Overlay ``topics.json`` (or its ``.bak``) on the built-in table.

        Raises:
            StoreError: the file and its backup are both damaged.
        """
        loaded = await self._file.load()
        if loaded is None:
            return
        for name, topic_config in loaded.value.topic_config_table.items():
            self._table[name] = topic_config
            log.info("load exist local topic", topic=name)
        self._data_version = loaded.value.data_version

    async def persist(self) -> None:
        """Write ``topics.json`` (pretty, as upstream) with the previous content in ``.bak``."""
        await self._file.persist(self.wrapper())

    @property
    def config(self) -> BrokerConfig:
        """The broker settings in effect."""
        return self._config

    @config.setter
    def config(self, value: BrokerConfig) -> None:
        self._config = value

    # -- reading

    @property
    def data_version(self) -> DataVersion:
        """The table's current version."""
        return self._data_version

    @property
    def table(self) -> Mapping[str, TopicConfig]:
        """A read-only view of the table."""
        return self._table

    def select(self, topic: str) -> TopicConfig | None:
        """``selectTopicConfig``."""
        return self._table.get(topic)

    def is_order_topic(self, topic: str) -> bool:
        """``isOrderTopic``."""
        found = self._table.get(topic)
        return found is not None and found.order

    def is_system_topic(self, topic: str) -> bool:
        """``TopicValidator.isSystemTopic`` including the topics this broker registered as such."""
        return topic in self._system_topics or topic.startswith(tv.SYSTEM_TOPIC_PREFIX)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        """``buildTopicConfigSerializeWrapper``: a snapshot of the table and its version."""
        return TopicConfigSerializeWrapper(
            topic_config_table=dict(self._table), data_version=self._data_version
        )

    # -- changing

    def _changed(self) -> None:
        self._data_version = self._data_version.next_version(
            self._clock.wall_ms(), self._state_version()
        )
        self._on_change()

    def bump_data_version(self) -> None:
        """A new DataVersion with the current state version (controller mode: after a role
        change, ``getDataVersion().nextVersion(masterEpoch)``); persists and re-registers."""
        self._changed()

    def replace_from_master(self, wrapper: TopicConfigSerializeWrapper) -> None:
        """Slave metadata sync (``SlaveSynchronize.syncTopicConfig``, 5.x): the table and its
        DataVersion become the master's, topics the master lacks are removed; the change is
        persisted and registered like any other, under the master's version."""
        self._table = dict(wrapper.topic_config_table)
        self._data_version = wrapper.data_version
        self._on_change()

    def create_in_send(
        self, topic: str, default_topic: str, client_queue_nums: int, topic_sys_flag: int, peer: str
    ) -> TopicConfig | None:
        """``createTopicInSendMessageMethod``: a new topic inheriting from ``default_topic``.

        Returns:
            The (existing or new) config, or None when the default topic is missing or does not
            have PERM_INHERIT (with ``autoCreateTopicEnable=false`` TBW102 never has it).
        """
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        default = self._table.get(default_topic)
        if default is None:
            log.warning(
                "Create new topic failed, because the default topic not exist",
                default_topic=default_topic,
                producer=peer,
            )
            return None
        if (
            default_topic == tv.AUTO_CREATE_TOPIC_KEY_TOPIC
            and not self._config.auto_create_topic_enable
        ):
            default = replace(default, perm=PERM_READ | PERM_WRITE)
            self._table[default_topic] = default
        if not default.perm & PERM_INHERIT:
            log.warning(
                "Create new topic failed, because the default topic has no perm",
                default_topic=default_topic,
                perm=default.perm,
                producer=peer,
            )
            return None
        queues = max(0, min(client_queue_nums, default.write_queue_nums))
        created = TopicConfig(
            topic_name=topic,
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=default.perm & ~PERM_INHERIT,
            topic_sys_flag=topic_sys_flag,
            topic_filter_type=default.topic_filter_type,
        )
        log.info(
            "Create new topic by default topic",
            default_topic=default_topic,
            topic=topic,
            producer=peer,
        )
        self._table[topic] = created
        self._changed()
        return created

    def create_in_send_back(
        self, topic: str, queue_nums: int, perm: int, *, order: bool = False, sys_flag: int = 0
    ) -> TopicConfig:
        """``createTopicInSendMessageBackMethod``: create ``topic`` if absent (retry/DLQ
        topics); an existing topic only has its ``order`` flag aligned."""
        existing = self._table.get(topic)
        if existing is not None:
            if existing.order != order:
                existing = replace(existing, order=order)
                self._table[topic] = existing
                self._changed()
            return existing
        created = TopicConfig(
            topic_name=topic,
            read_queue_nums=queue_nums,
            write_queue_nums=queue_nums,
            perm=perm,
            topic_sys_flag=sys_flag,
            order=order,
        )
        log.info("create new topic", topic=topic, queues=queue_nums, perm=perm)
        self._table[topic] = created
        self._changed()
        return created

    def update(
        self, topic_config: TopicConfig, modification: Mapping[str, str] | None = None
    ) -> None:
        """``updateTopicConfig`` (UPDATE_AND_CREATE_TOPIC): replace or create. The topic's
        attributes become its current ones altered by ``modification`` (signed keys,
        ``AttributeUtil.alterCurrentAttributes`` over ``TopicAttributes.ALL``); the
        ``attributes`` of ``topic_config`` itself are ignored.

        Raises:
            InvalidAttributeError: the modification is refused; the table is unchanged.
        """
        old = self._table.get(topic_config.topic_name)
        attributes = alter_current_attributes(
            old is None,
            TOPIC_ATTRIBUTES,
            old.attributes if old is not None else {},
            modification or {},
        )
        topic_config = replace(topic_config, attributes=attributes)
        if old is not None:
            log.info("update topic config", topic=topic_config.topic_name)
        else:
            log.info("create new topic", topic=topic_config.topic_name)
        self._table[topic_config.topic_name] = topic_config
        self._changed()

    def update_order_topics(self, order_topics: Mapping[str, str]) -> None:
        """``updateOrderTopicConfig``: topics the NameServer lists as ordered get ``order``
        set (never cleared here; use UPDATE_AND_CREATE_TOPIC)."""
        changed = False
        for topic in order_topics:
            found = self._table.get(topic)
            if found is not None and not found.order:
                self._table[topic] = replace(found, order=True)
                log.info("update order topic config", topic=topic, order=True)
                changed = True
        if changed:
            self._changed()

    def delete(self, topic: str) -> bool:
        """``deleteTopicConfig``; True if the topic existed."""
        if self._table.pop(topic, None) is None:
            log.warning("delete topic config failed, topic not exists", topic=topic)
            return False
        log.info("delete topic config OK", topic=topic)
        self._changed()
        return True
