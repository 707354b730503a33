"""Periodic consume-queue flush and checkpoint writes (``FlushConsumeQueueService``).

Owns: the task that, every ``flushIntervalConsumeQueue`` ms, makes consume queues with at least
``flushConsumeQueueLeastPages`` dirty pages durable, and every
``flushConsumeQueueThoroughInterval`` ms flushes all of them and then writes the checkpoint. The
commit log's own flush (ASYNC interval / SYNC group commit) lives in ``commit_log/flusher.py``.
Must not: flush on the loop -- every ``fdatasync`` and the checkpoint write run on the store's
ordered flush executor.

Checkpoint rule (as upstream): ``logicsMsgTimestamp`` is captured *before* a thorough flush and
written after it, so the persisted value never describes units that were not yet durable;
``physicMsgTimestamp`` is the store time of the last record the commit log made durable
(``CommitLog.flushed_store_timestamp``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from concurrent.futures import Executor

import structlog

from rocketpy.common.clock import Clock
from rocketpy.store.checkpoint import StoreCheckpoint
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.consume_queue.consume_queue import ConsumeQueue
from rocketpy.store.mapped_file import PAGE_SIZE

log = structlog.get_logger(__name__)


def _flush_queues(jobs: list[tuple[ConsumeQueue, int]]) -> None:
    """Make each queue durable up to its snapshot end. Blocks."""
    for cq, end in jobs:
        cq.mfq.flush(end)


class ConsumeQueueFlushService:
    """Flushes consume queues periodically; a thorough pass also writes the checkpoint."""

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        queues: Callable[[], Iterable[ConsumeQueue]],
        checkpoint: Callable[[], StoreCheckpoint | None],
        physic_timestamp: Callable[[], int],
        executor: Executor,
        clock: Clock,
        confirm_offset: Callable[[], int | None] = lambda: None,
    ) -> None:
        """Args:
        config: intervals and least pages.
        queues: the current consume queues (read on the loop at each pass).
        checkpoint: the store's checkpoint once opened.
        physic_timestamp: store time of the last durable commit-log record.
        executor: the store's ordered flush executor.
        clock: monotonic time for the thorough interval.
        confirm_offset: controller mode's confirm offset (``confirmPhyOffset``), None
            outside controller mode.
        """
        self._config = config
        self._queues = queues
        self._checkpoint = checkpoint
        self._physic_timestamp = physic_timestamp
        self._executor = executor
        self._clock = clock
        self._confirm_offset = confirm_offset
        self._last_thorough = clock.monotonic_ms()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Completed passes and checkpoint writes (tests and statistics wait on them).
        self.passes = 0
        self.checkpoint_writes = 0

    def start(self) -> None:
        """Start the periodic task."""
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="store/consumequeue-flush"
        )

    async def stop(self) -> None:
        """Stop the task, then flush everything and write the checkpoint. Idempotent."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            await task
            await self.flush(thorough=True)

    async def _run(self) -> None:
        interval = self._config.flush_interval_consume_queue / 1000
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._stop.wait()
            if self._stop.is_set():
                return
            now = self._clock.monotonic_ms()
            thorough = (
                now - self._last_thorough >= self._config.flush_consume_queue_thorough_interval
            )
            if thorough:
                self._last_thorough = now
            try:
                await self.flush(thorough=thorough)
            except OSError:
                log.exception("flush consume queue failed")

    async def flush(self, *, thorough: bool) -> None:
        """One ``doFlush`` pass: dirty-enough queues (all when ``thorough``), then the
        checkpoint when ``thorough``."""
        least = 0 if thorough else self._config.flush_consume_queue_least_pages
        checkpoint = self._checkpoint()
        logics = checkpoint.logics_msg_timestamp if checkpoint is not None else 0
        physic = self._physic_timestamp()
        jobs: list[tuple[ConsumeQueue, int]] = []
        for cq in self._queues():
            last = cq.mfq.last
            end = cq.mfq.max_offset
            flushed = last.file_from_offset + last.flushed_position if last is not None else 0
            if end > flushed and end // PAGE_SIZE - flushed // PAGE_SIZE >= least:
                jobs.append((cq, end))
        loop = asyncio.get_running_loop()
        if jobs:
            await loop.run_in_executor(self._executor, _flush_queues, jobs)
        self.passes += 1
        if thorough and checkpoint is not None:
            if logics > 0:
                checkpoint.logics_msg_timestamp = logics
            if physic > 0:
                checkpoint.physic_msg_timestamp = physic
            confirm = self._confirm_offset()
            if confirm is not None and confirm >= 0:
                checkpoint.confirm_phy_offset = confirm
            await checkpoint.flush_async(self._executor)
            self.checkpoint_writes += 1
