"""The message store facade (``DefaultMessageStore``): start/recover, put, get, offsets, stop.

Owns: the two executors (flush: ordered msync; alloc: file creation, recovery, cleanup), the
``abort`` file, the CommitLog, the consume-queue table and the reput task. Reads happen on the
loop (copies of mapped bytes); everything blocking runs on an executor.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import structlog

from rocketpy.common.clock import Clock, SystemClock
from rocketpy.common.message.record import INT32, Address, is_prepared_or_rollback
from rocketpy.store.checkpoint import StoreCheckpoint
from rocketpy.store.cleanup import CleanService, DiskUsage, correct_min_offset, disk_used_ratio
from rocketpy.store.commit_log.commit_log import CommitLog, queue_key
from rocketpy.store.commit_log.put_types import MessageBatch, MessageToStore, PutResult
from rocketpy.store.commit_log.record import valid_record_size
from rocketpy.store.commit_log.recovery import (
    PROGRESS_INTERVAL_S,
    RecoveryResult,
    drop_read_pages,
    recover_commit_log,
)
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.consume_queue.consume_queue import ConsumeQueue
from rocketpy.store.consume_queue.reput import ArrivalHook, ReputService, valid_end
from rocketpy.store.consume_queue.unit import MAX_UNITS_PER_PACK, CqUnit
from rocketpy.store.dispatch import (
    BatchHint,
    BoundedDispatcher,
    CommitLogDispatcher,
    DispatchRequest,
)
from rocketpy.store.flush import ConsumeQueueFlushService
from rocketpy.store.get_types import GetResult
from rocketpy.store.read_path import MAX_PULL_BYTES, read_queue
from rocketpy.store.run_files import StoreLock, abort_from_this_boot, write_abort

log = structlog.get_logger(__name__)

# Start-up re-dispatch goes this many bytes at a time (then drops the pages it read).
_DISPATCH_SLICE = 64 * 1024 * 1024


def _drained() -> None:
    """A no-op job: awaiting it waits for every job queued on an executor before it."""


class MessageStore:
    """CommitLog + consume queues + reput, behind ``start``/``stop``."""

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        store_host: Address = ("127.0.0.1", 10911),
        clock: Clock | None = None,
        on_arrival: ArrivalHook | None = None,
        disk_usage: DiskUsage = disk_used_ratio,
        replica: bool = False,
        hold_tail: bool = False,
    ) -> None:
        self.config = config
        self._replica = replica  # a classic slave: recovery cuts the last record it walks
        #: Controller mode: the last record recovery walked stays undispatched until the first
        #: role change decides it (:meth:`settle_tail`); where it starts while held.
        self._hold_tail = hold_tail
        self._held: int | None = None
        self.clock = clock or SystemClock()
        self._flush_executor = ThreadPoolExecutor(1, thread_name_prefix="store-flush")
        self._alloc_executor = ThreadPoolExecutor(1, thread_name_prefix="store-alloc")
        self.commit_log = self._new_commit_log(store_host)
        self.reput = self._new_reput(on_arrival)
        self.commit_log.replicated_timestamp = lambda: self.reput.scanned
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.checkpoint: StoreCheckpoint | None = None
        self.cq_flush = ConsumeQueueFlushService(
            config,
            queues=lambda: list(self.queues.values()),
            checkpoint=lambda: self.checkpoint,
            physic_timestamp=lambda: self.commit_log.flushed_store_timestamp,
            executor=self._flush_executor,
            clock=self.clock,
            confirm_offset=self._confirm_offset,
        )
        self.clean = CleanService(
            config,
            self.commit_log.mfq,
            queues=lambda: list(self.queues.values()),
            reput_offset=lambda: self.reput.reput_from,
            executor=self._alloc_executor,
            clock=self.clock,
            disk_usage=disk_usage,
            on_disk_full=self.commit_log.set_disk_full,
        )
        self.recovery: RecoveryResult | None = None
        self._lock: StoreLock | None = None
        self._started = False
        self._stopped = False
        self._append_listeners: list[Callable[[], None]] = []

    # -- replication (rocketpy.store.replication.ReplicationLog, the HA layer's view) ---------

    def add_append_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (on the loop) after every append; the HA master's wake-up."""
        self._append_listeners.append(listener)

    def set_confirm_offset_provider(self, provider: Callable[[], int]) -> None:
        """Dispatch no further than ``provider()`` (controller mode's confirm offset)."""
        self.commit_log.set_dispatch_limit(provider)

    @property
    def max_phy_offset(self) -> int:
        """End of the last written commit-log byte (``getMaxPhyOffset``)."""
        return self.commit_log.max_offset

    @property
    def min_phy_offset(self) -> int:
        """Start of the first commit-log segment (``getMinPhyOffset``)."""
        return self.commit_log.min_offset

    @property
    def segment_size(self) -> int:
        """Bytes per commit-log segment."""
        return self.commit_log.mfq.file_size

    @property
    def dispatched_offset(self) -> int:
        """The reput's position (``reputFromOffset``)."""
        return self.reput.reput_from

    def wake_dispatch(self) -> None:
        """Let the reput look for dispatchable bytes now."""
        self.reput.wake()

    def valid_end(self) -> int:
        """End of the last whole, valid record from the dispatch position (HA truncation)."""
        return valid_end(self.commit_log.mfq, max(self.reput.reput_from, self.min_phy_offset))

    def register_dispatcher(self, dispatcher: CommitLogDispatcher) -> None:
        """Add a dispatcher (e.g. the IndexService) before :meth:`start`."""
        self.reput.register(dispatcher)

    def rewind_dispatch(self, dispatcher: BoundedDispatcher) -> None:
        """A restarted ``dispatcher`` (a replaced index worker) is given again the records
        after the last one it holds (``ReputService.rewind``)."""
        self.reput.rewind(dispatcher, self.commit_log.min_offset)

    def _confirm_offset(self) -> int | None:
        limit = self.commit_log.dispatch_limit
        return limit() if limit is not None else None

    def _new_commit_log(self, store_host: Address) -> CommitLog:
        """The commit log this store appends to (DLedger CommitLog mode overrides it)."""
        return CommitLog(
            self.config,
            store_host=store_host,
            clock=self.clock,
            flush_executor=self._flush_executor,
            alloc_executor=self._alloc_executor,
            on_append=self._wake_reput,
        )

    def _new_reput(self, on_arrival: ArrivalHook | None) -> ReputService:
        """The dispatcher from :attr:`commit_log` to the consume queues (after the commit log)."""
        return ReputService(
            self.commit_log.mfq,
            self._dispatch_bound,
            on_arrival=on_arrival,
            hints=self.commit_log.dispatch_hints,
            put_run=self._put_cq_run,
            put_batch=self._put_cq_batch,
        )

    def _dispatch_bound(self) -> int:
        bound = self.commit_log.confirm_offset()
        held = self._held
        return bound if held is None else min(bound, held)

    async def settle_tail(self, *, keep: bool) -> None:
        """Controller mode's first role change decides the record :meth:`start` held back: a
        master keeps it (its log is the history; it dispatches now), a slave cuts it (it may
        be a replica's torn tail whose tear no check sees; the master sends it again).
        Nothing acknowledged is lost: a slave never acked bytes it did not receive. No-op
        when nothing is held."""
        held, self._held = self._held, None
        if held is None:
            return
        if keep:
            self.reput.wake()
            return
        log.info("the last record recovery walked is fetched from the master again",
                 offset=held, max_offset=self.commit_log.max_offset)  # fmt: skip
        await self.truncate_files(held)

    def _wake_reput(self) -> None:
        self.reput.wake()
        for listener in self._append_listeners:
            listener()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Lock, load, recover (normal or abnormal), re-dispatch, create ``abort``, start tasks.

        Raises:
            StoreError: another process holds the store's lock.
        """
        held = await self.lock()
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._alloc_executor, self._load_and_recover)
            recovery = self.recovery
            if recovery is not None:
                if self._hold_tail:
                    self._held = recovery.last_start
                if recovery.start_from in ("dispatched", "checkpoint"):
                    self.reput.reput_from = recovery.walk_start
                else:
                    self.reput.reput_from = max(
                        [q.max_physic_offset for q in self.queues.values()]
                        + [self.commit_log.min_offset]
                    )
            self.commit_log.flushed_offset = self.commit_log.max_offset
            self.reput.catch_up(self.commit_log.min_offset)
            await self._dispatch_recovered()
            self.recover_topic_queue_table()
            await loop.run_in_executor(self._alloc_executor, write_abort, self.config.abort_path)
        except BaseException:
            held.release()
            self._lock = None
            raise
        self.commit_log.start()
        self.reput.start(self._put_cq)
        self.cq_flush.start()
        self.clean.start()
        self._started = True
        log.info("message store started", root=str(self.config.root_dir),
                 max_offset=self.commit_log.max_offset)  # fmt: skip

    async def _dispatch_recovered(self) -> None:
        """Re-dispatch what recovery found past the consume queues, a slice at a time: the
        pages each slice read are dropped from the mappings, and a progress line is logged
        every few seconds (after a crash of the machine this can be a whole segment)."""
        reput = self.reput
        target = reput.bound()
        start = reput.reput_from
        began = shown = time.monotonic()
        while reput.reput_from < target:
            before = reput.reput_from
            upto = min(target, before + _DISPATCH_SLICE)
            await reput.dispatch_available(self._put_cq, notify=False, upto=upto)
            drop_read_pages(self.commit_log.mfq, before, reput.reput_from)
            if reput.reput_from <= before:
                break  # a record longer than a slice: the pass below takes it
            now = time.monotonic()
            if now - shown >= PROGRESS_INTERVAL_S:
                shown = now
                log.info("dispatch behind recovering", offset=reput.reput_from,
                         remaining=target - reput.reput_from,
                         mb_per_s=round((reput.reput_from - start) / (now - began) / 1e6,
                                        1))  # fmt: skip
        await reput.dispatch_available(self._put_cq, notify=False)

    async def lock(self) -> StoreLock:
        """Take the OS lock on ``<root>/lock`` (idempotent). Whoever opens any file of the
        store (the index, config files) calls it first; :meth:`start` does.

        Raises:
            StoreError: another process holds the lock (a broker runs on this store).

        Returns:
            The held lock.
        """
        if self._lock is None:
            self._lock = await asyncio.get_running_loop().run_in_executor(
                self._alloc_executor, StoreLock.acquire, self.config.root_dir / "lock"
            )
        return self._lock

    def _load_and_recover(self) -> None:
        root = self.config.root_dir
        root.mkdir(parents=True, exist_ok=True)
        self._abnormal = self.config.abort_path.exists()
        # The process died but the machine did not: the page cache kept every mapped write.
        same_boot = self._abnormal and abort_from_this_boot(self.config.abort_path)
        self.checkpoint = StoreCheckpoint.open(self.config.checkpoint_path)
        self.commit_log.mfq.load()
        cq_root = self.config.consume_queue_dir
        if cq_root.is_dir():
            for topic_dir in sorted(cq_root.iterdir()):
                for qdir in sorted(topic_dir.iterdir()):
                    if qdir.name.lstrip("-").isdigit():
                        q = self._new_queue(topic_dir.name, int(qdir.name))
                        q.recover()
        trusted = not self._abnormal or same_boot
        self.recovery = recover_commit_log(
            self.commit_log.mfq,
            abnormal=self._abnormal,
            dispatched=self._dispatched_boundary() if trusted else None,
            min_timestamp=self.checkpoint.min_timestamp(),
            check_crc=self.config.check_crc_on_recover,
            cut_dir=root / "recovery",
            trust_last=not self._replica,
        )
        for q in self.queues.values():
            q.truncate_by_commit_log(self.recovery.process_offset)
            # Retention may have deleted the commit log below units the queue still has.
            correct_min_offset(q, self.commit_log.min_offset)

    def _dispatched_boundary(self) -> int | None:
        """The end of the furthest consume-queue unit when the record it points at is whole
        (the reput dispatches in commit-log order, so everything below it was dispatched)."""
        best = max(self.queues.values(), key=lambda q: q.max_physic_offset, default=None)
        if best is None or best.max_physic_offset <= 0:
            return None
        unit = best.get_unit(best.max_offset - 1)
        mf = self.commit_log.mfq.find(unit.commit_log_offset) if unit is not None else None
        if unit is None or mf is None:
            return None
        view = mf.view(0, mf.size)
        try:
            size = valid_record_size(view, unit.commit_log_offset - mf.file_from_offset,
                               check_crc=self.config.check_crc_on_recover)  # fmt: skip
        finally:
            view.release()
        if size != unit.size:
            log.warning("consume queue end does not match the commit log",
                        topic=best.topic, queue_id=best.queue_id,
                        offset=unit.commit_log_offset, size=unit.size)  # fmt: skip
            return None
        return unit.commit_log_offset + size

    async def stop(self) -> None:
        """Flush everything, write the checkpoint, remove ``abort``, close. Idempotent."""
        if self._stopped or not self._started:
            if self._lock is not None and not self._started:
                self._lock.release()  # locked by a start that failed later
                self._lock = None
            return
        self._stopped = True
        await self.clean.stop()
        await self.commit_log.stop()
        await self.reput.stop(self._put_cq)
        await self.cq_flush.stop()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._flush_executor, self._close_files)
        # A deleteTopics whose request was cancelled (the server's stop cancels what is still
        # in flight) may still remove files on the allocation thread: wait for it here, off
        # the loop, so that the shutdowns below, which wait, never hold the loop.
        await loop.run_in_executor(self._alloc_executor, _drained)
        self._flush_executor.shutdown()
        self._alloc_executor.shutdown()
        log.info("message store stopped")

    def _close_files(self) -> None:
        for q in self.queues.values():
            q.flush()
            q.close()
        if self.checkpoint is not None:
            now = self.clock.wall_ms()
            self.checkpoint.physic_msg_timestamp = now
            self.checkpoint.logics_msg_timestamp = now
            self.checkpoint.close()
        caught_up = self.reput.reput_from >= self.commit_log.max_offset
        self.commit_log.mfq.close()
        if caught_up:
            self.config.abort_path.unlink(missing_ok=True)
        if self._lock is not None:
            self._lock.release()

    # ------------------------------------------------------------------ write

    def put_message(
        self, msg: MessageToStore, appended: Callable[[], None] | None = None
    ) -> Awaitable[PutResult]:
        """Append one message (store.md section 3). The commit log's coroutine itself: no
        frame of ours per message. ``appended``: called once it is written, before a
        SYNC_FLUSH wait for the disk."""
        return self.commit_log.put_message(msg, appended)

    def put_message_nowait(self, msg: MessageToStore) -> PutResult | None:
        """:meth:`put_message` if it needs no await, else None with nothing written."""
        return self.commit_log.put_message_nowait(msg)

    def put_batch(
        self, batch: MessageBatch, appended: Callable[[], None] | None = None
    ) -> Awaitable[PutResult]:
        """Append a batch with consecutive queue offsets (the commit log's coroutine);
        ``appended`` as for :meth:`put_message`."""
        return self.commit_log.put_batch(batch, appended)

    def put_then(
        self, what: MessageToStore | MessageBatch, on_result: Callable[[PutResult], None]
    ) -> PutResult | bool:
        """:meth:`CommitLog.put_then <rocketpy.store.commit_log.commit_log.CommitLog.put_then>`."""
        return self.commit_log.put_then(what, on_result)

    def put_batch_nowait(self, batch: MessageBatch) -> PutResult | None:
        """:meth:`put_batch` if it needs no await, else None with nothing written."""
        return self.commit_log.put_batch_nowait(batch)

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        q = ConsumeQueue(
            self.config.consume_queue_dir, topic, queue_id,
            self.config.mapped_file_size_consume_queue, self._alloc_executor,
        )  # fmt: skip
        self.queues[(topic, queue_id)] = q
        return q

    def _put_cq(self, req: DispatchRequest) -> Awaitable[None] | None:
        """Build the consume-queue unit of one record: synchronously in the common case (no
        coroutine per record on the dispatch path), else an awaitable the reput awaits."""
        if is_prepared_or_rollback(req.sys_flag):
            return None
        topic, queue_id = req.topic, req.queue_id
        q = self.queues.get((topic, queue_id))
        if q is None:
            q = self._new_queue(topic, queue_id)
        offset, size, tags_code = req.commit_log_offset, req.msg_size, req.tags_code
        if not q.put_nowait(offset, size, tags_code, req.consume_queue_offset):
            if offset + size <= q.max_physic_offset:
                return None  # already there (a recovery re-dispatch): no coroutine to skip it
            unit = CqUnit(commit_log_offset=offset, size=size, tags_code=tags_code)
            return self._put_cq_slow(q, unit, req.consume_queue_offset, req.store_timestamp)
        checkpoint = self.checkpoint
        if checkpoint is not None:
            checkpoint.logics_msg_timestamp = req.store_timestamp
        return None

    def _put_cq_run(self, run: list[DispatchRequest]) -> bool:
        """The consume-queue units of a run of records of one queue at consecutive queue
        offsets (a batch), written at once when the queue's segment has room for all of them;
        False (nothing written) sends the reput back to :meth:`_put_cq` per record. Never for
        prepared/rolled-back records."""
        first = run[0]
        units: list[int] = []
        for req in run:
            units += (req.commit_log_offset, req.msg_size, req.tags_code)
        return self._put_units(
            first.topic, first.queue_id, units, first.consume_queue_offset,
            run[-1].store_timestamp,
        )  # fmt: skip

    def _put_cq_batch(self, hint: BatchHint) -> bool:
        """:meth:`_put_cq_run` for a hinted batch: its units as the hint holds them."""
        if len(hint.units) > 3 * MAX_UNITS_PER_PACK:
            return False
        return self._put_units(
            hint.topic, hint.queue_id, hint.units, hint.consume_queue_offset,
            hint.store_timestamp,
        )  # fmt: skip

    def _put_units(
        self, topic: str, queue_id: int, units: list[int], queue_offset: int, timestamp: int
    ) -> bool:
        q = self.queues.get((topic, queue_id))
        if q is None or not q.put_run_nowait(units, queue_offset):
            return False
        checkpoint = self.checkpoint
        if checkpoint is not None:
            checkpoint.logics_msg_timestamp = timestamp
        return True

    async def _put_cq_slow(
        self, q: ConsumeQueue, unit: CqUnit, queue_offset: int, store_timestamp: int
    ) -> None:
        await q.put(unit, queue_offset, self._alloc_executor)
        if self.checkpoint is not None:
            # As ConsumeQueue.putMessagePositionInfoWrapper; persisted only by a thorough
            # consume-queue flush (flush.py), after the units are durable.
            self.checkpoint.logics_msg_timestamp = store_timestamp

    # ------------------------------------------------------------------ read

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Min queue offset (0 when the queue does not exist)."""
        q = self.queues.get((topic, queue_id))
        return q.min_offset if q else 0

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next queue offset (0 when the queue does not exist)."""
        q = self.queues.get((topic, queue_id))
        return q.max_offset if q else 0

    def look_message_by_offset(self, phy_offset: int) -> bytes | None:
        """The whole record at commit-log ``phy_offset``, or None."""
        head = self.commit_log.mfq.read(phy_offset, 4)
        if head is None:
            return None
        (size,) = INT32.unpack_from(head, 0)
        return self.commit_log.mfq.read(phy_offset, size) if size > 0 else None

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        *,
        offset: int,
        max_count: int,
        max_size: int = MAX_PULL_BYTES,
        tags_codes: set[int] | None = None,
    ) -> GetResult:
        """Read up to ``max_count`` records from ``offset`` (store.md section 10)."""
        del group  # consumer-group based filtering (SQL92/class filter) is out of scope
        return read_queue(
            self.queues.get((topic, queue_id)), self.commit_log.mfq, offset=offset,
            max_count=max_count, max_size=max_size, tags_codes=tags_codes,
        )  # fmt: skip

    async def append_replicated(self, start_offset: int, data: bytes) -> None:
        """Append bytes received from the HA master at ``start_offset`` (see CommitLog).

        An empty log starts dispatching at ``start_offset`` (an empty slave starts at the
        master's last segment, ha.md section 2.2).
        """
        if not self.commit_log.mfq.files:
            self.reput.reput_from = start_offset
        await self.commit_log.append_replicated(start_offset, data)

    def recover_topic_queue_table(self) -> None:
        """Rebuild the next queue offset of every queue from the consume queues
        (``recoverTopicQueueTable``: a slave that becomes master continues its queues)."""
        self.commit_log.topic_queue_table = {
            queue_key(q.topic, q.queue_id): q.max_offset for q in self.queues.values()
        }

    def read_raw(self, offset: int, max_bytes: int) -> bytes | None:
        """Raw commit-log bytes for the HA master (see CommitLog.read_raw)."""
        return self.commit_log.read_raw(offset, max_bytes)

    async def delete_topics(self, topics: set[str], consume_queue_dir: Path) -> int:
        """``deleteTopics``: forget the topics' queues and delete their files; returns how many
        queues went. The files go on the allocation thread, the one that makes consume-queue
        segments, so a dispatch still holding one of these queues cannot interleave with the
        removal (it used to run on another thread: the directory vanished under a segment
        being made, and the reput stopped)."""
        doomed = [key for key in self.queues if key[0] in topics]
        queues = [self.queues.pop(key) for key in doomed]
        for q in queues:
            q.deleted = True
        for topic, queue_id in doomed:
            self.commit_log.topic_queue_table.pop(queue_key(topic, queue_id), None)

        def work() -> None:
            for q in queues:
                q.close()
            for topic in topics:
                shutil.rmtree(consume_queue_dir / topic, ignore_errors=True)

        # The queues are already out of the table: a caller cancelled now (the server's stop
        # cancels requests still in flight) must not cancel the removal too, or the queues
        # stay mapped and their files come back as queues of a deleted topic at the next
        # start. stop() waits for it before shutting the executor down.
        await asyncio.shield(asyncio.get_running_loop().run_in_executor(self._alloc_executor, work))
        return len(queues)

    async def truncate_files(self, offset: int) -> None:
        """Cut the commit log and consume queues back to ``offset`` (HA truncation).

        The cut bytes of the segment that keeps ``offset`` are zeroed: moving the positions
        alone would let a restart's recovery walk find the cut (divergent) records still valid
        after the new tail and bring them back.
        """
        loop = asyncio.get_running_loop()
        old_max = self.commit_log.max_offset
        mfq = self.commit_log.mfq
        kept = mfq.find(offset)

        def work() -> None:
            mfq.truncate_dirty_files(offset)
            for q in self.queues.values():
                q.truncate_by_commit_log(offset)
            if kept is not None:
                start = offset - kept.file_from_offset
                end = min(old_max - kept.file_from_offset, kept.size)
                if end > start:
                    kept.zero(start, end)

        self.commit_log.dispatch_hints.clear()  # their offsets may be reused past the cut
        await loop.run_in_executor(self._alloc_executor, work)
        self.commit_log.flushed_offset = min(self.commit_log.flushed_offset, offset)
        self.reput.reput_from = min(self.reput.reput_from, offset)
        self.recover_topic_queue_table()
