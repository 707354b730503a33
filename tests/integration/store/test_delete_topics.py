"""deleteTopics racing the dispatch of the same topic, on real 400-byte consume-queue segments.

A dispatch fetches its queue, then awaits the allocation thread for the queue's next segment;
DELETE_TOPIC_IN_BROKER may run in between. Each interleaving is forced, not hoped for: a gate
job holds the allocation thread, or an executor hands a made segment back only when told.
A queue normally has its next segment made ahead (``ConsumeQueue._reserve_ahead``) and rolls
without waiting; the racing tests turn that off to reach the roll that must make one (the
allocation thread was busy, or making it ahead failed).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any, TypeVar

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.consume_queue.consume_queue import ConsumeQueue
from rocketpy.store.consume_queue.unit import CqUnit
from rocketpy.store.mapped_file import MappedFile
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration

T = TypeVar("T")


class _HeldResults(Executor):
    """Runs each job on ``inner`` at once but, until :meth:`release`, hands its result back
    only then: a dispatch whose segment is made before deleteTopics and which resumes after
    it. Jobs submitted after the release pass straight through."""

    def __init__(self, inner: Executor) -> None:
        self._inner = inner
        self.ran: list[Future[Any]] = []
        self._held: list[Future[Any]] | None = []

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        ran = self._inner.submit(fn, *args, **kwargs)
        if self._held is None:
            return ran
        held: Future[T] = Future()
        self.ran.append(ran)
        self._held.append(held)
        return held

    def release(self) -> None:
        held, self._held = self._held or [], None
        for ran, h in zip(self.ran, held, strict=True):
            h.set_result(ran.result())


def _config(root: Path) -> MessageStoreConfig:
    return MessageStoreConfig.build({
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": 4096,
        "mappedFileSizeConsumeQueue": 400,
        "flushIntervalCommitLog": 50,
    })  # fmt: skip


def _msg(topic: str, i: int) -> MessageToStore:
    return MessageToStore(topic=topic, queue_id=0, body=f"body-{i}".encode() * 10)


async def _full_queue(store: MessageStore) -> ConsumeQueue:
    """TopicTest queue 0 with 20 units: its 400-byte first segment is full."""
    for i in range(20):
        assert (await store.put_message(_msg("TopicTest", i))).status is PutMessageStatus.PUT_OK
    await wait_until(lambda: store.max_offset_in_queue("TopicTest", 0) == 20, 5)
    return store.queues[("TopicTest", 0)]


def _unit(store: MessageStore, past_end: int) -> CqUnit:
    return CqUnit(commit_log_offset=store.commit_log.max_offset + past_end, size=100, tags_code=0)


async def _delete_while_segment_queued(store: MessageStore, queue: ConsumeQueue) -> bool:
    """The stale put's segment request waits behind a gate job; deleteTopics sets the flag
    and queues its removal behind that request; then the gate opens."""
    gate = threading.Event()
    held = asyncio.get_running_loop().run_in_executor(store._alloc_executor, gate.wait)
    try:
        stale = asyncio.create_task(queue.put(_unit(store, 1000), 20, store._alloc_executor))
        await asyncio.sleep(0)  # the stale put has asked for its segment
        delete = asyncio.create_task(
            store.delete_topics({"TopicTest"}, store.config.consume_queue_dir)
        )
        await asyncio.sleep(0)  # deleteTopics has set the flag and queued the removal
        assert queue.deleted
    finally:
        gate.set()
    await held
    assert await delete == 1
    return await stale


async def _delete_while_segment_returns(store: MessageStore, queue: ConsumeQueue) -> bool:
    """The stale put's segment is made before deleteTopics; the put resumes after it."""
    alloc = _HeldResults(store._alloc_executor)
    stale = asyncio.create_task(queue.put(_unit(store, 1000), 20, alloc))
    try:
        await wait_until(lambda: len(alloc.ran) == 1, 5)
        made = await asyncio.wrap_future(alloc.ran[0])
        assert isinstance(made, MappedFile)
        assert made.path.exists()
        assert await store.delete_topics({"TopicTest"}, store.config.consume_queue_dir) == 1
    finally:
        alloc.release()
    put = await stale
    assert made not in queue.mfq.files
    with pytest.raises(ValueError, match="closed"):
        made.read(0, 1)  # unmapped, not left to the garbage collector
    return put


@pytest.mark.parametrize(
    "race", [_delete_while_segment_queued, _delete_while_segment_returns], ids=["queued", "made"]
)
async def test_delete_topics_racing_dispatch_leaves_no_files(
    tmp_path: Path,
    race: Callable[[MessageStore, ConsumeQueue], Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """1. Put 20 messages to one queue (its 400-byte consume-queue segment is then full) and
    wait for the dispatch. 2. A dispatch still holding that queue asks for the next segment
    while deleteTopics runs: [queued] the request waits on the allocation thread until the
    delete has begun; [made] the segment is made before the delete and handed back after it.
    3. The same stale queue takes another put.
    Expected: the delete removes the topic's directory and queue; neither stale put raises,
    writes or makes the directory again ([made]: its segment is unmapped); the store keeps
    dispatching other topics and stops cleanly."""
    monkeypatch.setattr(ConsumeQueue, "_reserve_ahead", lambda self, mf: None)
    async with asyncio.timeout(30):
        store = MessageStore(_config(tmp_path))
        await store.start()
        try:
            queue = await _full_queue(store)
            root = store.config.consume_queue_dir
            assert (root / "TopicTest" / "0").is_dir()
            assert await race(store, queue) is False
            assert await queue.put(_unit(store, 2000), 21, store._alloc_executor) is False
            assert queue.max_offset == 20
            assert not (root / "TopicTest").exists()
            assert ("TopicTest", 0) not in store.queues
            assert (await store.put_message(_msg("Other", 0))).status is PutMessageStatus.PUT_OK
            await wait_until(lambda: store.max_offset_in_queue("Other", 0) == 1, 5)
        finally:
            await store.stop()
        assert not (root / "TopicTest").exists()


async def test_delete_topics_then_dispatch_makes_a_fresh_queue(tmp_path: Path) -> None:
    """1. Fill TopicTest queue 0 (20 units) and delete the topic. 2. Put one more message to
    TopicTest. 3. Restart the store.
    Expected: the dispatch makes a new queue starting at the new message's queue offset in a
    new directory; after the restart the queue is recovered from that directory alone."""
    async with asyncio.timeout(30):
        store = MessageStore(_config(tmp_path))
        await store.start()
        try:
            await _full_queue(store)
            assert await store.delete_topics({"TopicTest"}, store.config.consume_queue_dir) == 1
            r = await store.put_message(_msg("TopicTest", 20))
            assert r.status is PutMessageStatus.PUT_OK
            # The queue is in the table as soon as the dispatch makes it; its first unit is
            # written once its new segment exists (off the loop): wait for that unit.
            await wait_until(
                lambda: store.max_offset_in_queue("TopicTest", 0) == r.queue_offset + 1, 5
            )
            fresh = store.queues[("TopicTest", 0)]
            assert fresh.min_offset == r.queue_offset
        finally:
            await store.stop()
        again = MessageStore(_config(tmp_path))
        await again.start()
        try:
            assert again.max_offset_in_queue("TopicTest", 0) == r.queue_offset + 1
        finally:
            await again.stop()


async def test_delete_topics_cancelled_still_removes_before_stop(tmp_path: Path) -> None:
    """1. Fill TopicTest queue 0 and hold the allocation thread with a gate job. 2. Start
    deleteTopics and cancel it while its removal waits behind the gate (a request the
    server's stop cancels). 3. Open the gate and stop the store.
    Expected: the caller sees the cancellation; the removal still runs, before stop()
    returns: the queue's segments are unmapped and the topic's directory is gone."""
    async with asyncio.timeout(30):
        store = MessageStore(_config(tmp_path))
        await store.start()
        root = store.config.consume_queue_dir
        try:
            queue = await _full_queue(store)
            gate = threading.Event()
            held = asyncio.get_running_loop().run_in_executor(store._alloc_executor, gate.wait)
            try:
                delete = asyncio.create_task(store.delete_topics({"TopicTest"}, root))
                await asyncio.sleep(0)  # the removal is queued behind the gate
                delete.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await delete
                assert (root / "TopicTest").exists()
            finally:
                gate.set()
            await held
        finally:
            await store.stop()
        assert not (root / "TopicTest").exists()
        with pytest.raises(ValueError, match="closed"):
            queue.mfq.files[0].read(0, 1)
