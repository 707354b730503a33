"""The commit log's flush task: ASYNC interval flushes and SYNC_FLUSH group commit (store.md
section 3; upstream's ``FlushRealTimeService`` and ``GroupCommitService``).

Owns: the flushed offset and the store time it makes durable (``physicMsgTimestamp``), the
task that runs ``fdatasync`` passes on the flush executor, and the SYNC_FLUSH waiters, one
future per send, released together by the pass that covers them. Must not: append (the
commit log does, on the loop) or decide what a send answers (``CommitLog._put`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Protocol

import structlog

from rocketpy.common.ack_waiters import AckWaiters
from rocketpy.common.clock import Clock
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.mapped_file import PAGE_SIZE

log = structlog.get_logger(__name__)

#: Loop turns the SYNC_FLUSH task waits before each fdatasync (from the store4 branch's tuning).
_GROUP_COMMIT_YIELDS = 3


class FlushedLog(Protocol):
    """What the flush reads of the log it flushes (the :class:`CommitLog`)."""

    @property
    def max_offset(self) -> int:
        """End of the last written record: what a pass flushes up to."""
        ...

    @property
    def last_store_timestamp(self) -> int:
        """Store time of the newest appended record."""
        ...

    @property
    def sync_flush(self) -> bool:
        """Whether ``flushDiskType`` is SYNC_FLUSH."""
        ...

    def replicated_timestamp(self) -> tuple[int, int]:
        """(store time, end offset) of the newest record written from a master, (0, 0) if none."""
        ...


class CommitLogFlusher:
    """Makes the commit log durable: every ``flushIntervalCommitLog`` ms once
    ``flushCommitLogLeastPages`` pages are dirty (or the thorough interval passed), or at once
    for SYNC_FLUSH, where one pass releases every send waiting at or below its end."""

    def __init__(
        self,
        config: MessageStoreConfig,
        log_: FlushedLog,
        *,
        flush: Callable[[int], int],
        executor: Executor,
        clock: Clock,
        on_flushed: Callable[[], None],
    ) -> None:
        """Args:
        config: flush disk type, intervals, least pages, SYNC_FLUSH timeout.
        log_: the log flushed (its end and newest store times, read at each pass).
        flush: makes the log durable up to an offset and returns how far it is (blocks; run
            on ``executor``).
        executor: the store's ordered flush executor.
        clock: monotonic time for the thorough interval.
        on_flushed: called after a SYNC_FLUSH pass (the reput dispatches up to the flushed
            offset there).
        """
        self.config = config
        self._log = log_
        self._flush = flush
        self._executor = executor
        self._clock = clock
        self._on_flushed = on_flushed
        self.flushed_offset = 0
        # Store time of the last record known durable (``physicMsgTimestamp``).
        self.flushed_store_timestamp = 0
        # Wake-ups of the task so far, flushing or not (tests wait on it).
        self.checks = 0
        # fdatasync passes run (one pass satisfies every waiter below its target).
        self.passes = 0
        # SYNC_FLUSH waiters by end offset: True once durable, False at syncFlushTimeout.
        self._waiters = AckWaiters()
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self, flushed_offset: int) -> None:
        """Start the task; everything below ``flushed_offset`` is durable."""
        self.flushed_offset = flushed_offset
        self._task = asyncio.get_running_loop().create_task(
            self._loop(), name="store/commitlog-flush"
        )

    async def stop(self) -> None:
        """Stop the task, flush everything, cancel the waits left. Idempotent."""
        self._stop.set()
        self._wake.set()
        if self._task is not None:
            task, self._task = self._task, None
            await task
        await self.flush_once()
        self._waiters.cancel_all()

    def wake(self) -> None:
        """Ask for a pass now (SYNC_FLUSH: after an append; a replicated write)."""
        self._wake.set()

    def durable(self, end: int) -> asyncio.Future[bool]:
        """Wake the task and wait until ``end`` is durable: True, or False at
        ``syncFlushTimeout`` (a future, not a coroutine: one per SYNC_FLUSH send)."""
        self._wake.set()
        return self._waiters.future(end, self.config.sync_flush_timeout / 1000)

    async def flush_once(self) -> None:
        """One pass up to the log's end; also records a slave's newest durable store time."""
        target = self._log.max_offset
        replicated, replicated_end = self._log.replicated_timestamp()
        if target <= self.flushed_offset and not self._waiters:
            if replicated_end <= self.flushed_offset:
                # A slave's last records were durable before the reput told their time.
                self.flushed_store_timestamp = max(self.flushed_store_timestamp, replicated)
            return
        # Taken before the flush: every record it describes lies below ``target``.
        store_timestamp = max(self._log.last_store_timestamp, replicated)
        loop = asyncio.get_running_loop()
        flushed = await loop.run_in_executor(self._executor, self._flush, target)
        self.passes += 1
        self.flushed_offset = max(self.flushed_offset, flushed, target)
        self.flushed_store_timestamp = max(self.flushed_store_timestamp, store_timestamp)
        self._waiters.release(self.flushed_offset)
        if self._log.sync_flush:
            self._on_flushed()

    async def _loop(self) -> None:
        interval = self.config.flush_interval_commit_log / 1000
        least = self.config.flush_commit_log_least_pages * PAGE_SIZE
        thorough = self.config.flush_commit_log_thorough_interval
        last_thorough = self._clock.monotonic_ms()
        while not self._stop.is_set():
            if self._log.sync_flush:
                await self._wake.wait()
                # Group commit: let the producers the last flush released append again (each
                # needs a few loop turns), so one fdatasync covers all of them, not half.
                for _ in range(_GROUP_COMMIT_YIELDS):
                    await asyncio.sleep(0)
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(interval):
                        await self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            self.checks += 1
            now = self._clock.monotonic_ms()
            dirty = self._log.max_offset - self.flushed_offset
            if self._log.sync_flush or dirty >= least or now - last_thorough >= thorough:
                if now - last_thorough >= thorough:
                    last_thorough = now
                try:
                    await self.flush_once()
                except OSError:
                    log.exception("commit log flush failed")
