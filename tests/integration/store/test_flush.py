"""Flush services on real files: ASYNC least pages / thorough interval, SYNC group commit and
timeout, periodic consume-queue flush with checkpoint writes."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.clock import ManualClock
from rocketpy.store.checkpoint import decode_checkpoint
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.dispatch import DispatchRequest
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration


def _config(root: Path, **extra: object) -> MessageStoreConfig:
    return MessageStoreConfig.build({
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": 65536,
        "mappedFileSizeConsumeQueue": 4000,
        "flushIntervalCommitLog": 10,
        "flushCommitLogLeastPages": 4,
        "flushCommitLogThoroughInterval": 10000,
        **extra,
    })  # fmt: skip


def _msg(size: int = 100) -> MessageToStore:
    return MessageToStore(topic="FlushTopic", queue_id=0, body=b"x" * size)


async def test_commit_log_async_flush_least_pages_and_thorough(tmp_path: Path) -> None:
    """1. ASYNC_FLUSH, least 4 pages, thorough every 10 s of a ManualClock.
    2. Append one small message; let the flush task wake 3 times.
    3. Advance the clock by 10 s. 4. Append > 4 pages of messages.
    Expected: after 2 nothing is flushed (under 4 dirty pages, no thorough flush yet); after 3
    the thorough flush makes it durable; after 4 the least-pages rule flushes without a clock
    move."""
    clock = ManualClock()
    store = MessageStore(_config(tmp_path), clock=clock)
    async with asyncio.timeout(20):
        await store.start()
        cl = store.commit_log
        start = cl.flushed_offset
        await store.put_message(_msg())
        checks = cl.flusher.checks
        await wait_until(lambda: cl.flusher.checks >= checks + 3, 5)
        assert cl.flushed_offset == start
        clock.advance(10_000)
        await wait_until(lambda: cl.flushed_offset == cl.max_offset, 5)
        for _ in range(5 * 4096 // 200):
            await store.put_message(_msg(200))
        await wait_until(lambda: cl.max_offset - cl.flushed_offset < 4 * 4096, 5)
        assert cl.flushed_offset > start + 4 * 4096
        await store.stop()


async def test_commit_log_sync_group_commit_one_flush_for_many(tmp_path: Path) -> None:
    """1. SYNC_FLUSH store, one put to create the segment. 2. 64 concurrent puts.
    Expected: all PUT_OK and durable, satisfied by a handful of fdatasync passes, not 64."""
    store = MessageStore(_config(tmp_path, flushDiskType="SYNC_FLUSH"))
    async with asyncio.timeout(20):
        await store.start()
        await store.put_message(_msg())  # the first put creates the segment
        before = store.commit_log.flusher.passes
        results = await asyncio.gather(*(store.put_message(_msg()) for _ in range(64)))
        assert {r.status for r in results} == {PutMessageStatus.PUT_OK}
        assert store.commit_log.flushed_offset >= max(
            r.wrote_offset + r.wrote_bytes for r in results
        )
        assert 1 <= store.commit_log.flusher.passes - before <= 4
        await store.stop()


class _DurableOnly:
    """A dispatcher that records the end offset of each record it is given, and the flushed
    offset at that moment."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.seen: list[tuple[int, int]] = []

    def dispatch(self, request: DispatchRequest) -> None:
        end = request.commit_log_offset + request.msg_size
        self.seen.append((end, self._store.commit_log.flushed_offset))


async def test_commit_log_sync_flush_dispatches_durable_records_without_later_puts(
    tmp_path: Path,
) -> None:
    """1. SYNC_FLUSH store with a recording dispatcher. 2. 64 concurrent puts, twice, then one
    put alone. 3. No more puts.
    Expected: every record reaches the consume queue (129 units) with nothing appended after
    it to carry the reput along, and none was dispatched before it was durable."""
    store = MessageStore(_config(tmp_path, flushDiskType="SYNC_FLUSH"))
    recorder = _DurableOnly(store)
    store.register_dispatcher(recorder)
    async with asyncio.timeout(20):
        await store.start()
        for _ in range(2):
            results = await asyncio.gather(*(store.put_message(_msg()) for _ in range(64)))
            assert {r.status for r in results} == {PutMessageStatus.PUT_OK}
        assert (await store.put_message(_msg())).status is PutMessageStatus.PUT_OK
        await wait_until(lambda: store.max_offset_in_queue("FlushTopic", 0) == 129, 5)
        assert len(recorder.seen) == 129
        assert all(end <= flushed for end, flushed in recorder.seen)
        await store.stop()


async def test_commit_log_sync_flush_timeout(tmp_path: Path) -> None:
    """1. SYNC_FLUSH with syncFlushTimeout 100 ms. 2. Occupy the flush executor (a stuck disk).
    3. Put. 4. Free the executor, put again.
    Expected: 3 answers FLUSH_DISK_TIMEOUT (the message stays stored); 4 answers PUT_OK and the
    first message is durable too."""
    store = MessageStore(_config(tmp_path, flushDiskType="SYNC_FLUSH", syncFlushTimeout=100))
    async with asyncio.timeout(20):
        await store.start()
        stuck = threading.Event()
        blocker = asyncio.get_running_loop().run_in_executor(store._flush_executor, stuck.wait, 10)
        try:
            first = await store.put_message(_msg())
        finally:
            stuck.set()
        await blocker
        assert first.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        second = await store.put_message(_msg())
        assert second.status is PutMessageStatus.PUT_OK
        assert store.commit_log.flushed_offset >= first.wrote_offset + first.wrote_bytes
        await store.stop()


async def test_consume_queue_flush_writes_checkpoint(tmp_path: Path) -> None:
    """1. Consume-queue flush every 10 ms, thorough every 30 ms; commit log thorough 20 ms.
    2. Put 3 messages. 3. Read the checkpoint file from disk while the store runs.
    Expected: the file's logics and physic timestamps reach the last message's store time,
    written by the periodic thorough flush (no stop involved)."""
    cfg = _config(
        tmp_path,
        flushIntervalConsumeQueue=10,
        flushConsumeQueueThoroughInterval=30,
        flushCommitLogThoroughInterval=20,
    )
    store = MessageStore(cfg)
    async with asyncio.timeout(20):
        await store.start()
        results = [await store.put_message(_msg()) for _ in range(3)]
        last_ts = results[-1].store_timestamp

        def persisted() -> bool:
            values = decode_checkpoint(cfg.checkpoint_path.read_bytes())
            return values.logics_msg_timestamp == values.physic_msg_timestamp == last_ts

        await wait_until(persisted, 5)
        assert store.cq_flush.checkpoint_writes >= 1
        await store.stop()


async def test_commit_log_preallocates_next_segment(tmp_path: Path) -> None:
    """1. 64 KiB segments; put one message (creates segment 0). 2. Put until the log rolls.
    Expected: after 1 the file of segment 1 already exists at full size (created ahead, off the
    loop); after 2 the roll used it and segment 2 exists ahead; a clean stop removes the unused
    preallocated file so a restart sees only written segments."""
    cfg = _config(tmp_path)
    store = MessageStore(cfg)
    async with asyncio.timeout(20):
        await store.start()
        await store.put_message(_msg())
        seg = cfg.commit_log_dir
        await wait_until((seg / f"{65536:020d}").exists, 5)
        assert (seg / f"{65536:020d}").stat().st_size == 65536
        while store.commit_log.max_offset < 65536:
            await store.put_message(_msg(1000))
        await wait_until((seg / f"{2 * 65536:020d}").exists, 5)
        assert len(store.commit_log.mfq.files) == 2
        await store.stop()
        assert not (seg / f"{2 * 65536:020d}").exists()
