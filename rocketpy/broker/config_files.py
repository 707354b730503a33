"""The broker's JSON config files under ``<storePathRootDir>/config``: load with ``.bak``
fallback, persist atomically off the loop.

Owns: the file paths (``BrokerPathConfigHelper``) and :class:`ConfigFile`, a typed handle that
pairs a path with a codec from :mod:`rocketpy.remoting.protocol.body.config_shapes`. Must not:
hold the tables (the broker's TopicConfigManager / ConsumerOffsetManager do) or block the loop:
``load`` and ``persist`` run on the executor. Mirrors ``ConfigManager.load``/``persist``
(store.md section 7); the crash-safety and fallback rules are in :mod:`rocketpy.common.atomic_file`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import Generic, TypeVar

import structlog

from rocketpy.common.atomic_file import LatestWinsWriter, Loaded, read_with_backup
from rocketpy.remoting.protocol.body import config_shapes as shapes

log = structlog.get_logger(__name__)

T = TypeVar("T")

CONFIG_DIR = "config"


def topics_path(store_root: Path) -> Path:
    """``<root>/config/topics.json`` (``BrokerPathConfigHelper.getTopicConfigPath``)."""
    return store_root / CONFIG_DIR / "topics.json"


def consumer_offset_path(store_root: Path) -> Path:
    """``<root>/config/consumerOffset.json``."""
    return store_root / CONFIG_DIR / "consumerOffset.json"


def subscription_group_path(store_root: Path) -> Path:
    """``<root>/config/subscriptionGroup.json``."""
    return store_root / CONFIG_DIR / "subscriptionGroup.json"


def delay_offset_path(store_root: Path) -> Path:
    """``<root>/config/delayOffset.json``."""
    return store_root / CONFIG_DIR / "delayOffset.json"


class ConfigFile(Generic[T]):
    """One JSON config file and its codec.

    ``persist`` encodes on the loop (cheap, and it snapshots the value) and writes on the
    executor; concurrent persists never leave an older version on disk.
    """

    def __init__(
        self,
        path: Path,
        *,
        encode: Callable[[T], str],
        decode: Callable[[bytes], T],
        executor: Executor | None = None,
    ) -> None:
        """Args: ``path`` the file; ``encode``/``decode`` the codec; ``executor`` where file
        work runs (None: the loop's default executor)."""
        self.path = path
        self._encode = encode
        self._decode = decode
        self._executor = executor
        self._writer = LatestWinsWriter(path, executor)

    def load_sync(self) -> Loaded[T] | None:
        """Load the file, or its ``.bak`` when missing/empty/damaged. Blocks.

        Returns:
            The value and where it came from, or None for a store that never wrote the file.

        Raises:
            StoreError: a damaged file and no usable backup (names both paths).
        """
        loaded = read_with_backup(self.path, self._decode)
        if loaded is not None:
            log.info("load config file OK", path=str(loaded.path), from_backup=loaded.from_backup)
        return loaded

    async def load(self) -> Loaded[T] | None:
        """:meth:`load_sync` on the executor."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.load_sync)

    async def persist(self, value: T) -> None:
        """Write ``value`` (previous content to ``.bak``); returns when durable.

        Raises:
            OSError: the disk refused; the previous content stays loadable.
        """
        await self._writer.write(self._encode(value).encode("utf-8"))


def topics_file(
    store_root: Path, executor: Executor | None = None
) -> ConfigFile[shapes.TopicConfigSerializeWrapper]:
    """``config/topics.json``."""
    return ConfigFile(
        topics_path(store_root),
        encode=shapes.encode_topics,
        decode=shapes.decode_topics,
        executor=executor,
    )


def consumer_offset_file(
    store_root: Path, executor: Executor | None = None
) -> ConfigFile[shapes.ConsumerOffsetTable]:
    """``config/consumerOffset.json``."""
    return ConfigFile(
        consumer_offset_path(store_root),
        encode=shapes.encode_consumer_offsets,
        decode=shapes.decode_consumer_offsets,
        executor=executor,
    )


def subscription_group_file(
    store_root: Path, executor: Executor | None = None
) -> ConfigFile[shapes.SubscriptionGroupTable]:
    """``config/subscriptionGroup.json``."""
    return ConfigFile(
        subscription_group_path(store_root),
        encode=shapes.encode_subscription_groups,
        decode=shapes.decode_subscription_groups,
        executor=executor,
    )


def delay_offset_file(
    store_root: Path, executor: Executor | None = None
) -> ConfigFile[shapes.DelayOffsetTable]:
    """``config/delayOffset.json``."""
    return ConfigFile(
        delay_offset_path(store_root),
        encode=shapes.encode_delay_offsets,
        decode=shapes.decode_delay_offsets,
        executor=executor,
    )
