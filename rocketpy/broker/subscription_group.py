"""SubscriptionGroupManager: consumer-group configs and ``config/subscriptionGroup.json``.

Owns: the built-in groups, auto-creation on first use (``autoCreateSubscriptionGroup``), admin
update/delete and persistence. Mirrors ``broker/subscription/SubscriptionGroupManager`` (5.3.x;
store.md section 7). Must not: do I/O outside :meth:`load`/:meth:`persist`; a change calls
``on_change`` (the service persists).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import replace
from pathlib import Path

import structlog

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.config_files import ConfigFile, subscription_group_file
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.remoting.protocol.body.config_shapes import (
    DataVersion,
    SubscriptionGroupConfig,
    SubscriptionGroupTable,
)

log = structlog.get_logger(__name__)


def _noop() -> None:
    return None


class SubscriptionGroupManager:
    """Group name -> :class:`SubscriptionGroupConfig`."""

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
        """Build the table with the built-in groups; :meth:`load` overlays the file.

        Args:
            config: broker settings (``autoCreateSubscriptionGroup``).
            store_root: ``storePathRootDir``.
            executor: where file work runs.
            clock: wall clock for DataVersion timestamps.
            state_version: the store's state-machine version, else 0.
            on_change: called after every change.
        """
        self._config = config
        self._file: ConfigFile[SubscriptionGroupTable] = subscription_group_file(
            store_root, executor
        )
        self._clock = clock
        self._state_version = state_version
        self._on_change = on_change
        self._table: dict[str, SubscriptionGroupConfig] = {}
        self._forbidden: dict[str, Mapping[str, int]] = {}
        self._data_version = DataVersion(timestamp=clock.wall_ms())
        for group in tv.SYSTEM_GROUPS:
            self._table[group] = SubscriptionGroupConfig(group_name=group)

    async def load(self) -> None:
        """Overlay ``subscriptionGroup.json`` (or its ``.bak``).

        Raises:
            StoreError: the file and its backup are both damaged.
        """
        loaded = await self._file.load()
        if loaded is None:
            return
        for name, group in loaded.value.subscription_group_table.items():
            self._table[name] = group
            log.info("load exist subscription group", group=name)
        self._forbidden.update(loaded.value.forbidden_table)
        self._data_version = loaded.value.data_version

    @property
    def config(self) -> BrokerConfig:
        """The broker settings in effect."""
        return self._config

    @config.setter
    def config(self, value: BrokerConfig) -> None:
        self._config = value

    def snapshot(self) -> SubscriptionGroupTable:
        """The table as the file and GET_ALL_SUBSCRIPTIONGROUP_CONFIG carry it."""
        return SubscriptionGroupTable(
            subscription_group_table=dict(self._table),
            data_version=self._data_version,
            forbidden_table=dict(self._forbidden),
        )

    async def persist(self) -> None:
        """Write ``subscriptionGroup.json``."""
        await self._file.persist(self.snapshot())

    def replace_from_master(self, table: SubscriptionGroupTable) -> None:
        """Slave metadata sync (``syncSubscriptionGroupConfig``, 5.x): the table, forbidden
        table and DataVersion become the master's."""
        self._table = dict(table.subscription_group_table)
        self._forbidden = dict(table.forbidden_table)
        self._data_version = table.data_version
        self._on_change()

    @property
    def table(self) -> Mapping[str, SubscriptionGroupConfig]:
        """A read-only view of the table."""
        return self._table

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config without auto-creation."""
        return self._table.get(group)

    def contains(self, group: str) -> bool:
        """``containsSubscriptionGroup``."""
        return bool(group.strip()) and group in self._table

    def _changed(self) -> None:
        self._data_version = self._data_version.next_version(
            self._clock.wall_ms(), self._state_version()
        )
        self._on_change()

    def find_consumable(self, group: str) -> SubscriptionGroupConfig:
        """The group a PULL or POP reads for (:meth:`find`), refused as upstream's processors do.

        Raises:
            RemoteError: SUBSCRIPTION_GROUP_NOT_EXIST, or NO_PERMISSION when its
                ``consumeEnable`` is off.
        """
        found = self.find(group)
        if found is None:
            raise RemoteError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist",
            )
        if not found.consume_enable:
            raise RemoteError(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
            )
        return found

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """``findSubscriptionGroupConfig``: the group, auto-created when allowed.

        Returns:
            None when the group is unknown and may not be created (auto-creation off and not a
            ``CID_RMQ_SYS_`` group, or an illegal name).
        """
        found = self._table.get(group)
        if found is not None:
            return found
        if not (self._config.auto_create_subscription_group or tv.is_sys_consumer_group(group)):
            return None
        if not tv.is_group_name_valid(group):
            return None
        created = SubscriptionGroupConfig(group_name=group)
        self._table[group] = created
        log.info("auto create a subscription group", group=group)
        self._changed()
        return created

    def update(self, group_config: SubscriptionGroupConfig) -> None:
        """``updateSubscriptionGroupConfig``: replace or create; attributes merge."""
        old = self._table.get(group_config.group_name)
        if old is not None:
            merged = {**old.attributes, **group_config.attributes}
            group_config = replace(group_config, attributes=merged)
            log.info("update subscription group config", group=group_config.group_name)
        else:
            log.info("create new subscription group", group=group_config.group_name)
        self._table[group_config.group_name] = group_config
        self._changed()

    def delete(self, group: str) -> bool:
        """``deleteSubscriptionGroupConfig``; True if it existed."""
        self._forbidden.pop(group, None)
        if self._table.pop(group, None) is None:
            log.warning("delete subscription group failed, not exist", group=group)
            return False
        log.info("delete subscription group OK", group=group)
        self._changed()
        return True
