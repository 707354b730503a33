"""The CommitLog: appends records, assigns offsets, flushes (store.md section 3).

Owns: physical and per topic-queue offset assignment, the end-of-file blank record, the flush
task (ASYNC interval flush, SYNC group commit) and the ``topicQueueTable``. Appends run on the
loop (the only writer); segment creation runs on the allocation executor and msync on the flush
executor. Must not: dispatch to consume queues (``consume_queue/reput.py`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

import structlog

from rocketpy.common.clock import Clock
from rocketpy.store.commit_log.record import (
    BLANK_SIZE,
    MAX_PROPERTIES_BYTES,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Address,
    MessageRecord,
    choose_magic,
    encode_blank,
    encode_offset_msg_id,
    encode_record,
    transaction_type,
)
from rocketpy.store.config import FlushDiskType, MessageStoreConfig
from rocketpy.store.mapped_file import PAGE_SIZE, MappedFile
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)


class PutStatus(enum.Enum):
    """``PutMessageStatus`` values this store produces."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageToStore:
    """What a producer sent, before the broker assigns offsets and the store timestamp."""

    topic: str
    queue_id: int
    body: bytes
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Address = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties: str = ""
    wait_store: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendResult:
    """Outcome of one put (a batch reports its first record's offsets and all msg ids)."""

    status: PutStatus
    wrote_offset: int = -1
    wrote_bytes: int = 0
    msg_id: str = ""
    queue_offset: int = -1
    store_timestamp: int = 0
    msg_num: int = 0


def _queue_key(topic: str, queue_id: int) -> str:
    return f"{topic}-{queue_id}"


class CommitLog:
    """Append side of the commit log plus its flush task."""

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        store_host: Address,
        clock: Clock,
        flush_executor: Executor,
        alloc_executor: Executor,
        on_append: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.store_host = store_host
        self.clock = clock
        self.mfq = MappedFileQueue(config.commit_log_dir, config.mapped_file_size_commit_log)
        self.topic_queue_table: dict[str, int] = {}
        self.flushed_offset = 0
        # Store timestamp of the last appended record, and of the last one known durable
        # (``physicMsgTimestamp`` for the checkpoint, as FlushRealTimeService sets it).
        self.last_store_timestamp = 0
        self.flushed_store_timestamp = 0
        # Wake-ups of the flush task so far, flushing or not (tests wait on it).
        self.flush_checks = 0
        # fdatasync passes run (one pass satisfies every waiter below its target).
        self.flushes = 0
        self._flush_executor = flush_executor
        self._alloc_executor = alloc_executor
        self._on_append = on_append
        self._roll_lock = asyncio.Lock()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.writable = False
        # Set by the clean service when disk usage passes diskSpaceWarningLevelRatio.
        self.disk_full = False

    def set_disk_full(self, full: bool) -> None:
        """Mark (or clear) the disk-full flag; appends are refused while it is set."""
        if full != self.disk_full:
            log.warning("disk full flag changed", disk_full=full)
        self.disk_full = full

    @property
    def sync_flush(self) -> bool:
        """Whether ``flushDiskType`` is SYNC_FLUSH."""
        return self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH

    @property
    def max_offset(self) -> int:
        """End of the last written record."""
        return self.mfq.max_offset

    @property
    def min_offset(self) -> int:
        """Start of the first segment."""
        return self.mfq.min_offset

    def confirm_offset(self) -> int:
        """Dispatch end bound (store.md section 5): flushed for SYNC_FLUSH, else max offset."""
        return self.flushed_offset if self.sync_flush else self.max_offset

    def start(self) -> None:
        """Start the flush task; the log must be loaded and recovered."""
        self.flushed_offset = self.max_offset
        self.writable = True
        self._task = asyncio.get_running_loop().create_task(
            self._flush_loop(), name="store/commitlog-flush"
        )

    async def stop(self) -> None:
        """Refuse appends, flush everything, stop the flush task. Idempotent."""
        self.writable = False
        self._stop.set()
        self._wake.set()
        if self._task is not None:
            task, self._task = self._task, None
            await task
        await self._flush_once()

    async def put_message(self, msg: MessageToStore) -> AppendResult:
        """Append one message and, for SYNC_FLUSH with ``wait_store``, wait for its flush."""
        return await self.put_messages([msg])

    async def put_messages(self, msgs: list[MessageToStore]) -> AppendResult:
        """Append messages as consecutive records (a batch: consecutive queue offsets)."""
        if not self.writable or self.disk_full:
            return AppendResult(status=PutStatus.SERVICE_NOT_AVAILABLE)
        if not msgs:
            return AppendResult(status=PutStatus.MESSAGE_ILLEGAL)
        for m in msgs:
            if len(m.body) > self.config.max_message_size:
                return AppendResult(status=PutStatus.MESSAGE_ILLEGAL)
            if len(m.properties.encode()) > MAX_PROPERTIES_BYTES:
                return AppendResult(status=PutStatus.PROPERTIES_SIZE_EXCEEDED)
        results: list[AppendResult] = []
        for m in msgs:
            result = await self._append_one(m)
            if result.status is not PutStatus.PUT_OK:
                return result
            results.append(result)
        first = results[0]
        ids = [r.msg_id for r in results]
        end = results[-1].wrote_offset + results[-1].wrote_bytes
        self._on_append()
        status = PutStatus.PUT_OK
        if self.sync_flush:
            status = await self._await_flush(end, wait=msgs[0].wait_store)
        return AppendResult(
            status=status,
            wrote_offset=first.wrote_offset,
            wrote_bytes=end - first.wrote_offset,
            msg_id=",".join(ids),
            queue_offset=first.queue_offset,
            store_timestamp=first.store_timestamp,
            msg_num=len(msgs),
        )

    async def _writable_file(self) -> MappedFile:
        last = self.mfq.last
        if last is not None and not last.is_full:
            return last
        async with self._roll_lock:
            last = self.mfq.last
            if last is None or last.is_full:
                start = self.mfq.next_file_offset()
                loop = asyncio.get_running_loop()
                mf = await loop.run_in_executor(self._alloc_executor, self.mfq.create_next, start)
                self.mfq.add(mf)
                last = mf
            return last

    async def _append_one(self, m: MessageToStore) -> AppendResult:
        topic_bytes = m.topic.encode()
        while True:
            mf = await self._writable_file()
            # From here to the write there is no await: the loop is the only writer.
            tx = transaction_type(m.sys_flag)
            dispatched = tx not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
            key = _queue_key(m.topic, m.queue_id)
            queue_offset = self.topic_queue_table.get(key, 0) if dispatched else 0
            now = self.clock.wall_ms()
            rec = MessageRecord(
                topic=m.topic,
                queue_id=m.queue_id,
                body=m.body,
                flag=m.flag,
                queue_offset=queue_offset,
                physical_offset=mf.file_from_offset + mf.wrote_position,
                sys_flag=m.sys_flag,
                born_timestamp=m.born_timestamp,
                born_host=m.born_host,
                store_timestamp=now,
                store_host=self.store_host,
                reconsume_times=m.reconsume_times,
                prepared_transaction_offset=m.prepared_transaction_offset,
                properties=m.properties,
                magic=choose_magic(topic_bytes),
            )
            raw = encode_record(rec)
            if len(raw) + BLANK_SIZE > mf.size:
                return AppendResult(status=PutStatus.MESSAGE_ILLEGAL)
            if len(raw) + BLANK_SIZE > mf.remaining:
                mf.append(encode_blank(mf.remaining))
                mf.wrote_position = mf.size
                continue
            pos = mf.append(raw)
            if dispatched:
                self.topic_queue_table[key] = queue_offset + 1
            self.last_store_timestamp = now
            wrote = mf.file_from_offset + pos
            return AppendResult(
                status=PutStatus.PUT_OK,
                wrote_offset=wrote,
                wrote_bytes=len(raw),
                msg_id=encode_offset_msg_id(self.store_host, wrote),
                queue_offset=queue_offset,
                store_timestamp=now,
                msg_num=1,
            )

    async def _await_flush(self, end: int, *, wait: bool) -> PutStatus:
        if self.flushed_offset >= end:
            return PutStatus.PUT_OK
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((end, fut))
        self._wake.set()
        if not wait:
            return PutStatus.PUT_OK
        try:
            async with asyncio.timeout(self.config.sync_flush_timeout / 1000):
                await asyncio.shield(fut)
        except TimeoutError:
            log.warning("flush disk timeout", offset=end)
            return PutStatus.FLUSH_DISK_TIMEOUT
        return PutStatus.PUT_OK

    async def _flush_once(self) -> None:
        target = self.max_offset
        if target <= self.flushed_offset and not self._waiters:
            return
        store_timestamp = self.last_store_timestamp
        loop = asyncio.get_running_loop()
        flushed = await loop.run_in_executor(self._flush_executor, self.mfq.flush, target)
        self.flushes += 1
        self.flushed_offset = max(self.flushed_offset, flushed, target)
        self.flushed_store_timestamp = max(self.flushed_store_timestamp, store_timestamp)
        still: list[tuple[int, asyncio.Future[None]]] = []
        for end, fut in self._waiters:
            if end <= self.flushed_offset:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((end, fut))
        self._waiters = still
        if self.sync_flush:
            self._on_append()

    async def _flush_loop(self) -> None:
        interval = self.config.flush_interval_commit_log / 1000
        least = self.config.flush_commit_log_least_pages * PAGE_SIZE
        thorough = self.config.flush_commit_log_thorough_interval
        last_thorough = self.clock.monotonic_ms()
        while not self._stop.is_set():
            if self.sync_flush:
                await self._wake.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(interval):
                        await self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            self.flush_checks += 1
            now = self.clock.monotonic_ms()
            dirty = self.max_offset - self.flushed_offset
            if self.sync_flush or dirty >= least or now - last_thorough >= thorough:
                if now - last_thorough >= thorough:
                    last_thorough = now
                try:
                    await self._flush_once()
                except OSError:
                    log.exception("commit log flush failed")
