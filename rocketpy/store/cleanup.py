"""Retention: delete expired commit-log segments, then the consume-queue segments they orphan.

Owns: when to delete (the ``deleteWhen`` hours, disk usage over ``diskMaxUsedSpaceRatio``),
the disk-full flag (usage over ``diskSpaceWarningLevelRatio``), which head
segments go (older than ``fileReservedTime`` hours, or any when cleaning at once over
``diskSpaceCleanForciblyRatio``), and the consume-queue follow-up (``deleteExpiredFile`` +
``correctMinOffset``) plus min-offset hooks (the index service). Mirrors
``DefaultMessageStore.CleanCommitLogService`` and ``CleanConsumeQueueService``.

Never deleted: the last (current) segment, and -- stricter than upstream -- any segment with
bytes at or above ``min(reput offset, floor())``, where ``floor`` is an optional hook (the smallest
physical offset a slave still has to read): undispatched records are never lost. Decisions and
list edits run on the loop; ``stat``, ``statvfs`` and unlinks run on the allocation executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from pathlib import Path
from typing import Final

import structlog

from rocketpy.common.clock import Clock
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.consume_queue.consume_queue import ConsumeQueue
from rocketpy.store.consume_queue.unit import BLANK_UNIT_SIZE, UNIT_SIZE, decode_unit
from rocketpy.store.mapped_file import MappedFile
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)

DELETE_FILES_BATCH_MAX: Final = 10  # DefaultMessageStore.deleteFileBatchMax default
_HOUR_MS: Final = 3_600_000

#: Used fraction (0..1) of the file system holding a path; blocks.
DiskUsage = Callable[[Path], float]
#: Called with the commit log's new min offset after segments went (index clean-up).
MinOffsetHook = Callable[[int], Awaitable[object]]


def disk_used_ratio(path: Path) -> float:
    """``UtilAll.getDiskPartitionSpaceUsedPercent``: (total - free) / total, -1 unknown. Blocks."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    if st.f_blocks == 0:
        return -1.0
    return (st.f_blocks - st.f_bfree) / st.f_blocks


def is_time_to_delete(delete_when: str, wall_ms: int) -> bool:
    """``UtilAll.isItTimeToDo``: the local hour is one of the ``;``-separated hours."""
    hour = datetime.datetime.fromtimestamp(wall_ms / 1000).hour
    return any(p.strip().isdigit() and int(p) == hour for p in delete_when.split(";"))


def file_mtimes_ms(files: list[MappedFile]) -> list[int]:
    """``getLastModifiedTimestamp`` of each file (0 when it is gone). Blocks."""
    out = []
    for mf in files:
        try:
            out.append(os.stat(mf.path).st_mtime_ns // 1_000_000)
        except FileNotFoundError:
            out.append(0)
    return out


def destroy_files(files: list[MappedFile]) -> None:
    """Unlink and unmap detached files. Blocks."""
    for mf in files:
        mf.destroy()
        log.info("delete expired file", path=str(mf.path))


class CleanService:
    """Periodic retention pass over one store's commit log and consume queues."""

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: MappedFileQueue,
        *,
        queues: Callable[[], Iterable[ConsumeQueue]],
        reput_offset: Callable[[], int],
        executor: Executor,
        clock: Clock,
        disk_usage: DiskUsage = disk_used_ratio,
        on_disk_full: Callable[[bool], None] = lambda full: None,
    ) -> None:
        self._config = config
        self._mfq = commit_log
        self._queues = queues
        self._reput_offset = reput_offset
        self._executor = executor
        self._clock = clock
        self._disk_usage = disk_usage
        self._on_disk_full = on_disk_full
        #: Smallest physical offset something (a slave) still needs; None = no extra floor.
        self.floor: Callable[[], int] | None = None
        self.min_offset_hooks: list[MinOffsetHook] = []
        self._last_min_offset = 0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.deleted_files = 0

    def start(self) -> None:
        """Run a pass every ``cleanResourceInterval`` ms."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="store/clean")

    async def stop(self) -> None:
        """Stop the periodic task. Idempotent."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            await task

    async def _run(self) -> None:
        interval = self._config.clean_resource_interval / 1000
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._stop.wait()
            if self._stop.is_set():
                return
            try:
                await self.run_once()
            except OSError:
                log.exception("clean expired files failed")

    async def run_once(self) -> int:
        """One commit-log pass then one consume-queue pass.

        Returns:
            How many commit-log segments were deleted.
        """
        loop = asyncio.get_running_loop()
        ratio = await loop.run_in_executor(self._executor, self._disk_usage, self._mfq.directory)
        space, at_once = self._space_to_delete(ratio)
        time_up = is_time_to_delete(self._config.delete_when, self._clock.wall_ms())
        deleted = 0
        if time_up or space:
            log.info("begin to delete before hours file", time_up=time_up, space_full=space,
                     clean_at_once=at_once,
                     hours=self._config.file_reserved_time)  # fmt: skip
            deleted = await self._delete_commit_log(
                clean_at_once=at_once and self._config.clean_file_forcibly_enable
            )
            if deleted == 0 and space:
                log.warning("disk space will be full soon, but delete file failed.")
        await self.clean_consume_queues()
        return deleted

    async def check_disk(self) -> None:
        """Measure the disk and set the disk-full flag now (what a pass does first): after a
        deletion made elsewhere (a DLedger member's clean-space pass) the flag clears at once
        instead of at the next ``cleanResourceInterval``."""
        loop = asyncio.get_running_loop()
        ratio = await loop.run_in_executor(self._executor, self._disk_usage, self._mfq.directory)
        self._space_to_delete(ratio)

    def _space_to_delete(self, ratio: float) -> tuple[bool, bool]:
        """``isSpaceToDelete``: (delete for space, clean at once); sets the disk-full flag."""
        cfg = self._config
        full = ratio > cfg.disk_space_warning_level_ratio / 100
        self._on_disk_full(full)
        if full:
            log.error("physic disk maybe full soon, so mark disk full", ratio=ratio)
            return True, True
        if ratio > cfg.disk_space_clean_forcibly_ratio / 100:
            return True, True
        if ratio > cfg.disk_max_used_space_ratio / 100:
            log.info("physic disk maybe full soon, so reclaim space", ratio=ratio)
            return True, False
        return False, False

    def _keep_from(self) -> int:
        keep = self._reput_offset()
        return min(keep, self.floor()) if self.floor is not None else keep

    async def _delete_commit_log(self, *, clean_at_once: bool) -> int:
        """``deleteExpiredFileByTime``: oldest first, stop at the first one that must stay."""
        loop = asyncio.get_running_loop()
        keep_from = self._keep_from()
        candidates = [
            mf for mf in self._mfq.files[:-1][:DELETE_FILES_BATCH_MAX]
            if mf.file_from_offset + mf.size <= keep_from
        ]  # fmt: skip
        mtimes = await loop.run_in_executor(self._executor, file_mtimes_ms, candidates)
        expire_ms = self._config.file_reserved_time * _HOUR_MS
        now = self._clock.wall_ms()
        victims: list[MappedFile] = []
        for mf, mtime in zip(candidates, mtimes, strict=True):
            if not clean_at_once and now < mtime + expire_ms:
                break  # avoid deleting files in the middle
            victims.append(mf)
        # Detach on the loop before the unlink: lookups never see a file being deleted.
        victims = [mf for mf in victims if mf in self._mfq.files[:-1]]
        for mf in victims:
            self._mfq.files.remove(mf)
        if victims:
            await loop.run_in_executor(self._executor, destroy_files, victims)
            self.deleted_files += len(victims)
        return len(victims)

    async def clean_consume_queues(self) -> None:
        """``CleanConsumeQueueService``: follow the commit log's new min offset."""
        min_offset = self._mfq.min_offset
        if min_offset <= self._last_min_offset:
            return
        self._last_min_offset = min_offset
        loop = asyncio.get_running_loop()
        for cq in list(self._queues()):
            victims = _expired_cq_files(cq, min_offset)
            for mf in victims:
                cq.mfq.files.remove(mf)
            if victims:
                await loop.run_in_executor(self._executor, destroy_files, victims)
            correct_min_offset(cq, min_offset)
        for hook in self.min_offset_hooks:
            await hook(min_offset)


def _expired_cq_files(cq: ConsumeQueue, min_phy_offset: int) -> list[MappedFile]:
    """``deleteExpiredFileByOffset``: head files whose last unit points below the min offset."""
    out: list[MappedFile] = []
    for mf in cq.mfq.files[:-1]:
        unit = decode_unit(mf.read(mf.size - UNIT_SIZE, UNIT_SIZE))
        if not unit.valid or unit.commit_log_offset >= min_phy_offset:
            break
        out.append(mf)
    return out


def correct_min_offset(cq: ConsumeQueue, min_phy_offset: int) -> None:
    """``correctMinOffset``: the first unit pointing at or above the commit log's min offset.

    Found by bisection: a queue's units point at increasing commit-log offsets, after any
    ``fillPreBlank`` placeholders (which count as below)."""
    files = cq.mfq.files
    if not files:
        return
    mf = files[0]
    lo, hi = 0, mf.wrote_position // UNIT_SIZE  # units [0, lo) below; [hi, ...) at or above
    while lo < hi:
        mid = (lo + hi) // 2
        unit = decode_unit(mf.read(mid * UNIT_SIZE, UNIT_SIZE))
        real = unit.valid and unit.size != BLANK_UNIT_SIZE
        if real and unit.commit_log_offset >= min_phy_offset:
            hi = mid
        else:
            lo = mid + 1
    cq.min_logic_offset = max(cq.min_logic_offset, mf.file_from_offset + lo * UNIT_SIZE)
