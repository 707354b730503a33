"""A DLedger member's clean-space service: retention of its data and index files and its
disk-full flag (dledger-commitlog.md section 1.6).

Owns: the periodic pass (every ``clean_space_interval_ms``, upstream's 100 ms): the used ratio
of the disks holding ``storeBaseDir`` and the data directory, the store's ``disk_full`` flag
(over ``getDiskFullRatio``: appends as leader and as follower refuse DISK_FULL), and, in the
``deleteWhen`` hours or over ``diskSpaceRatioToCheckExpired``, deleting the head data files
last modified ``fileReservedHours`` ago or more (any age over ``diskSpaceRatioToForceClean``
with ``enableDiskForceClean``), then the index files below the new ledger begin index; after a
deletion it measures the disk again at once, so the flag clears as soon as there is room, and
awaits the deletion listeners (the broker's consume-queue and index follow-up). Mirrors
``DLedgerMmapFileStore.CleanSpaceService`` (0.3.1.2).

Must not: choose files itself (:mod:`rocketpy.store.dledger_log.retention` does, never above
the committed position or the caller's ``keep_from``), or block the loop: ``statvfs``,
``stat`` and unlinks run on the member's I/O thread, ordered with its flushes and truncations.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Final

import structlog

from rocketpy.common.aio import periodic
from rocketpy.common.clock import Clock
from rocketpy.common.errors import StoreError
from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig
from rocketpy.store.cleanup import (
    DiskUsage,
    destroy_files,
    disk_used_ratio,
    file_mtimes_ms,
    is_time_to_delete,
)
from rocketpy.store.dledger_log.retention import detach_head, head_candidates, select_expired
from rocketpy.store.dledger_log.store import DLedgerLogStore

log = structlog.get_logger(__name__)

_HOUR_MS: Final = 3_600_000

#: Awaited with the data's new min offset after head files were deleted.
DeletedListener = Callable[[int], Awaitable[object]]


class CleanSpaceService:
    """Retention and the disk-full flag of one member's log."""

    def __init__(
        self,
        config: DLedgerMemberConfig,
        store: DLedgerLogStore,
        *,
        executor: Executor,
        clock: Clock,
        disk_usage: DiskUsage = disk_used_ratio,
    ) -> None:
        self._config = config
        self._store = store
        self._executor = executor
        self._clock = clock
        self._disk_usage = disk_usage
        #: The smallest data offset the owner still needs (the broker: its reput position).
        self.keep_from: Callable[[], int] = lambda: sys.maxsize
        self._listeners: list[DeletedListener] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: Data files deleted so far (statistics).
        self.deleted_files = 0

    def add_deleted_listener(self, listener: DeletedListener) -> None:
        """``listener(min_offset)`` is awaited after each pass that deleted data files."""
        self._listeners.append(listener)

    def start(self) -> None:
        """Run a pass every ``clean_space_interval_ms``."""
        name = f"dledger-{self._config.self_id}/clean-space"
        interval = self._config.clean_space_interval_ms / 1000
        self._task = asyncio.get_running_loop().create_task(
            periodic(interval, self._pass, stop=self._stop, name=name), name=name
        )

    async def stop(self) -> None:
        """Stop the periodic pass. Idempotent."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            await task

    async def _pass(self) -> None:
        try:
            await self.run_once()
        except StoreError:
            log.exception("Error in DLedgerCleanSpaceService")

    async def _ratio(self) -> float:
        """The larger used ratio of the disks of ``storeBaseDir`` and the data directory."""
        store = self._store

        def measure() -> float:
            return max(self._disk_usage(store.base_dir), self._disk_usage(store.data.directory))

        return await asyncio.get_running_loop().run_in_executor(self._executor, measure)

    async def run_once(self) -> int:
        """One pass (``doWork``).

        Returns:
            How many data files were deleted.
        """
        cfg, store = self._config, self._store
        ratio = await self._ratio()
        store.disk_full = ratio > cfg.disk_full_ratio
        time_up = is_time_to_delete(cfg.delete_when, self._clock.wall_ms())
        check_expired = ratio > cfg.disk_space_ratio_to_check_expired
        force = ratio > cfg.force_clean_ratio and cfg.enable_disk_force_clean
        if not (time_up or check_expired):
            return 0
        count = await self._delete_expired(clean_immediately=force)
        if count > 0 or force or store.disk_full:
            log.info("Clean space", count=count, time_up=time_up, check_expired=check_expired,
                     force_clean=force, disk_full=store.disk_full, ratio=ratio)  # fmt: skip
        if count == 0:
            return 0
        store.disk_full = await self._ratio() > cfg.disk_full_ratio
        min_offset = store.data.min_offset
        for listener in list(self._listeners):
            await listener(min_offset)
        return count

    async def _delete_expired(self, *, clean_immediately: bool) -> int:
        """``deleteExpiredFileByTime`` + ``reviseLedgerBeginIndex`` over what
        :func:`head_candidates` allows."""
        loop = asyncio.get_running_loop()
        candidates = head_candidates(self._store, self.keep_from())
        if not candidates:
            return 0
        mtimes = await loop.run_in_executor(self._executor, file_mtimes_ms, candidates)
        # Upstream raises a reservation under an hour to an hour.
        reserved_ms = max(self._config.file_reserved_hours, 1) * _HOUR_MS
        victims = select_expired(
            candidates, mtimes, now_ms=self._clock.wall_ms(), reserved_ms=reserved_ms,
            clean_immediately=clean_immediately,
        )  # fmt: skip
        detached = detach_head(self._store, victims, self.keep_from())
        if not detached:
            return 0
        await loop.run_in_executor(self._executor, destroy_files, detached)
        self.deleted_files += len(victims)
        return len(victims)
