"""The CommitLog: appends records, assigns offsets (store.md section 3).

Owns: physical and per topic-queue offset assignment, the end-of-file blank record, the
``topicQueueTable`` and what a put answers (SYNC_FLUSH: once its record is durable). Appends run
on the loop (the only writer); segment creation runs on the allocation executor. Must not:
flush (``flusher.py`` does, on the flush executor) or dispatch to consume queues
(``consume_queue/reput.py`` does).
"""

from __future__ import annotations

import dataclasses
import errno
from collections import deque
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar
from zlib import crc32

import structlog

from rocketpy.common.clock import Clock
from rocketpy.common.errors import StoreError
from rocketpy.common.message.decoder import offset_msg_ids
from rocketpy.common.message.properties import MAX_PROPERTIES_BYTES, tags_code_of
from rocketpy.common.message.record import (
    MAGIC_V1,
    MAGIC_V2,
    TRANSACTION_TYPE_MASK,
    Address,
    is_prepared_or_rollback,
    pack_address,
    record_struct,
    stored_sys_flag,
)
from rocketpy.store.commit_log.allocation import SegmentAllocator
from rocketpy.store.commit_log.batch_records import (
    Encoded,
    Shared,
    Written,
    encode_batch,
    encode_run,
    write_batch,
)
from rocketpy.store.commit_log.flusher import CommitLogFlusher
from rocketpy.store.commit_log.put_types import (
    Appender,
    MessageBatch,
    MessageToStore,
    PutMessageStatus,
    PutResult,
    batch_fields_fit,
    fields_fit,
)
from rocketpy.store.commit_log.record import BLANK_SIZE, room_or_blank
from rocketpy.store.config import FlushDiskType, MessageStoreConfig
from rocketpy.store.dispatch import BatchHint, DispatchRequest, Hint
from rocketpy.store.mapped_file import MappedFile
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)

#: Bounds of the dispatch hints (about 200 B each, a batch's one for all its records): their
#: number, and the commit-log bytes they span (what their properties texts take at most); past
#: either the reput parses records back.
MAX_DISPATCH_HINTS = 65536
MAX_HINTED_BYTES = 64 * 1024 * 1024
#: Bound of the topic name -> bytes cache.
_MAX_TOPIC_BYTES = 4096


def queue_key(topic: str, queue_id: int) -> str:
    """The ``topicQueueTable`` key of a queue (upstream's ``topic + "-" + queueId``)."""
    return f"{topic}-{queue_id}"


#: What an append takes: one message or a batch.
_M = TypeVar("_M", "MessageToStore", "MessageBatch")


class CommitLog:
    """Append side of the commit log; its flush task is :attr:`flusher`."""

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
        self._store_host = store_host
        self._store_host_bytes = b""
        self._msg_id_prefix = ""
        self.store_host = store_host
        self.clock = clock
        self.mfq = MappedFileQueue(
            config.commit_log_dir, config.mapped_file_size_commit_log, allocate=True
        )
        self.topic_queue_table: dict[str, int] = {}
        # Store timestamp of the last appended record.
        self.last_store_timestamp = 0
        # (store timestamp, end offset) of the last record written that no local append
        # described (bytes from the HA master, as the reput parses them); (0, 0) when none.
        self.replicated_timestamp: Callable[[], tuple[int, int]] = lambda: (0, 0)
        self._alloc_executor = alloc_executor
        self._segments = SegmentAllocator(self.mfq, alloc_executor)
        self._on_append = self._segments.warming(on_append)  # the reput, then pages ahead
        self.flusher = CommitLogFlusher(
            config, self, flush=self.mfq.flush, executor=flush_executor, clock=clock,
            on_flushed=self._on_append,
        )  # fmt: skip
        self.writable = False
        # Upper bound of dispatching set by the HA layer (controller mode's confirm offset);
        # None without one. Set through set_dispatch_limit at wiring time.
        self.dispatch_limit: Callable[[], int] | None = None
        # What each local append wrote (dispatch hints), for the reput (see ReputService);
        # bounded so a reput held back by the confirm offset does not grow it without limit.
        self.dispatch_hints: deque[Hint] = deque()
        # Topic name -> UTF-8 bytes (a broker has few topics; appends encode each once).
        self._topic_bytes: dict[str, bytes] = {}
        # Set by the clean service when disk usage passes diskSpaceWarningLevelRatio.
        self.disk_full = False

    def set_disk_full(self, full: bool) -> None:
        """Mark (or clear) the disk-full flag; appends are refused while it is set."""
        if full != self.disk_full:
            log.warning("disk full flag changed", disk_full=full)
        self.disk_full = full

    @property
    def store_host(self) -> Address:
        """STOREHOST of new records (and the offset message id prefix)."""
        return self._store_host

    @store_host.setter
    def store_host(self, host: Address) -> None:
        self._store_host = host
        self._store_host_bytes = pack_address(host)
        self._msg_id_prefix = self._store_host_bytes.hex().upper()

    @property
    def sync_flush(self) -> bool:
        """Whether ``flushDiskType`` is SYNC_FLUSH."""
        return self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH

    @property
    def flushed_offset(self) -> int:
        """How far the log is durable."""
        return self.flusher.flushed_offset

    @flushed_offset.setter
    def flushed_offset(self, offset: int) -> None:
        self.flusher.flushed_offset = offset

    @property
    def flushed_store_timestamp(self) -> int:
        """Store time of the last record known durable (the checkpoint's
        ``physicMsgTimestamp``, as FlushRealTimeService sets it)."""
        return self.flusher.flushed_store_timestamp

    @property
    def max_offset(self) -> int:
        """End of the last written record."""
        return self.mfq.max_offset

    @property
    def min_offset(self) -> int:
        """Start of the first segment."""
        return self.mfq.min_offset

    def set_dispatch_limit(self, limit: Callable[[], int]) -> None:
        """Never let :meth:`confirm_offset` exceed ``limit()`` (the replicated confirm offset
        of controller mode, ha.md section 3.7); replaces any earlier limit."""
        self.dispatch_limit = limit

    def confirm_offset(self) -> int:
        """Dispatch end bound (store.md section 5): flushed for SYNC_FLUSH, else max offset,
        and never above ``dispatch_limit()`` when the HA layer sets one (the replicated
        confirm offset of controller mode, ha.md section 3.7)."""
        base = self.flusher.flushed_offset if self.sync_flush else self.max_offset
        limit = self.dispatch_limit
        return base if limit is None else min(base, limit())

    def start(self) -> None:
        """Start the flush task; the log must be loaded and recovered."""
        self.writable = True
        last = self.mfq.last
        if last is not None and not last.is_full:
            last.appending()  # a recovered segment is appended to as a new one is
        self._segments.preallocate()
        self.flusher.start(self.max_offset)

    async def stop(self) -> None:
        """Refuse appends, flush everything, stop the flush task. Idempotent."""
        self.writable = False
        await self.flusher.stop()
        await self._segments.drop_ahead()

    def put_message(
        self, msg: MessageToStore, appended: Callable[[], None] | None = None
    ) -> Coroutine[Any, Any, PutResult]:
        """Append one message and, for SYNC_FLUSH with ``wait_store``, wait for its flush
        (the shared coroutine itself: no frame of ours per message). ``appended`` is called
        once the record is written, before that wait: the caller's work is done but for
        the disk (the broker gives back its send slot, as upstream's send thread returns
        while the flush future is pending)."""
        return self._put(self._append_nowait, msg, msg.wait_store, appended)

    def put_message_nowait(self, msg: MessageToStore) -> PutResult | None:
        """:meth:`put_message` when no await is needed: None, with nothing written, when it would
        wait (SYNC_FLUSH, or the current segment is full and the next must be rolled in)."""
        return self._put_nowait(self._append_nowait, msg)

    def nowait_appender(self) -> Appender | None:
        """:meth:`put_message_nowait` for a run of puts with no await between them: the append
        alone, its checks made once (None where it would not append at once). The caller
        calls :meth:`appended` after the run, which wakes the flush and the reput once."""
        if self.sync_flush or not self.writable or self.disk_full:
            return None
        return Appender(self._append_nowait, self._append_run_nowait)

    def appended(self) -> None:
        """A run of :meth:`nowait_appender` ended (whatever it appended)."""
        self._on_append()

    def put_then(
        self, what: MessageToStore | MessageBatch, on_result: Callable[[PutResult], None]
    ) -> PutResult | bool:
        """A put appended now and acknowledged later, its result handed to ``on_result``
        (called once, from the call that settles it, maybe before this returns): the refusal
        (``on_result`` never called), True once appended, False with nothing written where
        the put waits otherwise -- here, always: this log appends at once
        (:meth:`put_message_nowait`) or waits in :meth:`put_message` (a DLedger log answers
        after a quorum, ``broker/dledger_commitlog.py``)."""
        del what, on_result
        return False

    def put_batch(
        self, batch: MessageBatch, appended: Callable[[], None] | None = None
    ) -> Coroutine[Any, Any, PutResult]:
        """Append a batch as consecutive records of one segment with consecutive queue offsets;
        a batch that does not fit the current segment goes whole to the next, as upstream's
        encoded batch. ``appended`` as for :meth:`put_message`."""
        return self._put(self._append_batch_nowait, batch, batch.wait_store, appended)

    def put_batch_nowait(self, batch: MessageBatch) -> PutResult | None:
        """:meth:`put_batch` when no await is needed (see :meth:`put_message_nowait`)."""
        return self._put_nowait(self._append_batch_nowait, batch)

    async def _put(
        self,
        append: Callable[[_M], PutResult | None],
        what: _M,
        wait_store: bool,
        appended: Callable[[], None] | None,
    ) -> PutResult:
        if not self.writable or self.disk_full:
            return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        result = append(what)
        while result is None:
            try:
                await self._segments.roll()
            except OSError as e:
                return self._roll_failed(e)
            result = append(what)
        if result.status is not PutMessageStatus.PUT_OK:
            return result
        self._on_append()
        if self.sync_flush:
            end = result.wrote_offset + result.wrote_bytes
            flusher = self.flusher
            if flusher.flushed_offset < end:
                if not wait_store:
                    flusher.wake()
                    return result
                if appended is not None:
                    appended()
                if not await flusher.durable(end):
                    log.warning("flush disk timeout", offset=end)
                    return dataclasses.replace(result, status=PutMessageStatus.FLUSH_DISK_TIMEOUT)
        return result

    def _put_nowait(self, append: Callable[[_M], PutResult | None], what: _M) -> PutResult | None:
        if self.sync_flush:
            return None
        if not self.writable or self.disk_full:
            return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        result = append(what)
        if result is not None and result.status is PutMessageStatus.PUT_OK:
            self._on_append()
        return result

    def read_raw(self, offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` written bytes from ``offset``, never crossing a segment end.

        The HA master's ``getCommitLogData``: the range may cut records anywhere. None when
        ``offset`` is not in a segment or nothing is written there yet.
        """
        mf = self.mfq.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        size = min(mf.wrote_position - pos, max_bytes)
        return mf.read(pos, size) if size > 0 else None

    async def append_replicated(self, start_offset: int, data: bytes) -> None:
        """Write bytes a master sent at ``start_offset`` (``appendToCommitLog`` on an HA slave).

        The bytes land at the same physical offsets as on the master; an empty log starts a
        segment at ``start_offset``'s segment. Wakes the flush task and the reput.

        Raises:
            StoreError: not writable, ``start_offset`` is not this log's max offset (non-empty
                log), or the bytes would cross a segment end.
        """
        if not self.writable:
            raise StoreError("commit log is not writable")
        if self.mfq.files and start_offset != self.max_offset:
            raise StoreError(f"replicated offset {start_offset} != max offset {self.max_offset}")
        if not data:
            return
        await self._segments.writable_at(start_offset)
        last = self.mfq.last
        if last is None:
            raise StoreError("no segment to append replicated bytes to")
        if len(data) > last.remaining:
            raise StoreError(
                f"{len(data)} replicated bytes cross the segment end at {start_offset}"
            )
        last.append(data)
        self.flusher.wake()
        self._on_append()

    def _append_nowait(self, m: MessageToStore) -> PutResult | None:
        """Encode ``m`` straight into the current segment; None when a new one is needed.

        No await from the offset assignment to the write: the loop is the only writer.
        """
        files = self.mfq.files
        if not files:
            return None
        mf = files[-1]
        pos = mf.wrote_position
        size_limit = mf.size
        if pos >= size_limit:
            return None
        body = m.body
        body_len = len(body)
        if body_len > self.config.max_message_size:
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        topic_text = m.topic
        topic = self._topic(topic_text)
        text = m.properties
        props = text.encode()
        props_len = len(props)
        if props_len > MAX_PROPERTIES_BYTES:
            return PutResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        born = pack_address(m.born_host)
        topic_len = len(topic)
        st = record_struct(
            len(born), len(self._store_host_bytes), body_len, topic_len, props_len, topic_len > 127
        )
        size = st.size
        if size + BLANK_SIZE > size_limit - pos:
            fits = room_or_blank(mf, pos, size)
            return None if fits is None else PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        sys_flag = m.sys_flag
        queue_id = m.queue_id
        if not fields_fit(m):
            # Before a queue offset is taken: a field the record cannot hold would fail the
            # write after it, leaving a gap in the queue.
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        now = self.clock.wall_ms()
        queue_offset = self._take_queue_offsets(topic_text, queue_id, sys_flag, 1)
        wrote = mf.file_from_offset + pos
        prepared = m.prepared_transaction_offset
        # One pack_into for the record, and its dispatch hint: what the reput would otherwise
        # parse back.
        st.pack_into(
            mf.buffer, pos, size, MAGIC_V2 if topic_len > 127 else MAGIC_V1,
            crc32(body) & 0x7FFFFFFF, queue_id, m.flag, queue_offset, wrote,
            stored_sys_flag(sys_flag, born, self._store_host_bytes), m.born_timestamp, born, now,
            self._store_host_bytes,
            m.reconsume_times, prepared, body_len, body, topic_len, topic, props_len, props,
        )  # fmt: skip
        mf.wrote_position = pos + size
        if self._may_hint(wrote):
            self.dispatch_hints.append(DispatchRequest(
                topic_text, queue_id, wrote, size, tags_code_of(text), now, queue_offset, text,
                sys_flag, prepared,
            ))  # fmt: skip
        self.last_store_timestamp = now
        msg_id = f"{self._msg_id_prefix}{wrote:016X}"
        return PutResult(PutMessageStatus.PUT_OK, wrote, size, msg_id, queue_offset, now, 1)

    def _append_batch_nowait(self, batch: MessageBatch) -> PutResult | None:
        """:meth:`_append_nowait` for a batch: every record in the current segment, or none
        (None: a new segment is needed; the whole batch goes there). What the records share
        (topic, queue, hosts, flags) is encoded once."""
        mf = self.mfq.last
        if mf is None or mf.wrote_position >= mf.size:
            return None
        items = batch.items
        if not items:
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if not batch_fields_fit(batch) or batch.sys_flag & TRANSACTION_TYPE_MASK:
            # As in _append_nowait; and a batch is never transactional (asyncPutMessages).
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        topic_text = batch.topic
        born = pack_address(batch.born_host)
        encoding = encode_batch(
            batch, len(self._topic(topic_text)), len(born), len(self._store_host_bytes),
            self.config.max_message_size,
        )  # fmt: skip
        if isinstance(encoding, PutMessageStatus):
            return PutResult(encoding)
        encoded, total = encoding
        start = mf.wrote_position
        fits = room_or_blank(mf, start, total)
        if not fits:
            return None if fits is None else PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        now = self.clock.wall_ms()
        first, out = self._write_queue(
            mf, start, topic_text, batch.queue_id, batch.sys_flag, born, now, encoded, batch.uniqs
        )
        self.last_store_timestamp = now
        return PutResult(
            PutMessageStatus.PUT_OK, mf.file_from_offset + start, total,
            offset_msg_ids(self._msg_id_prefix, out.units[0::3]),
            first, now, len(items),
        )  # fmt: skip

    def _append_run_nowait(
        self, run: list[MessageToStore], uniqs: list[str]
    ) -> list[tuple[str, int]] | None:
        """The send lane's single messages (``run``, with their UNIQ_KEYs), written as one
        batch per queue (a queue's records in ``run``'s order, the queues in the order of
        their first message): each message's id and queue offset, in ``run``'s order. None,
        with nothing written, when they do not all fit the current segment, one is not a
        plain record (see :func:`encode_run`), or the run has fewer than two messages a queue
        on average: each then goes through :meth:`_append_nowait`, which answers for it."""
        mf = self.mfq.last
        if mf is None or len(run) < 2 * len({(m.topic, m.queue_id) for m in run}):
            return None  # (fewer than two a queue: a batch each would cost more than records)
        encoding = encode_run(
            run, self._topic, len(self._store_host_bytes), self.config.max_message_size
        )
        if encoding is None:
            return None
        queues, encoded, total = encoding
        start = mf.wrote_position
        if total + BLANK_SIZE > mf.size - start:
            return None
        now = self.clock.wall_ms()
        ids: list[tuple[str, int]] = [("", 0)] * len(run)
        prefix = self._msg_id_prefix
        for (topic_text, queue_id), (sys_flag, born_host, members) in queues.items():
            first, out = self._write_queue(
                mf, mf.wrote_position, topic_text, queue_id, sys_flag, pack_address(born_host),
                now, [encoded[i] for i in members], [uniqs[i] for i in members],
            )  # fmt: skip
            for i, wrote in zip(members, out.units[0::3], strict=True):
                ids[i] = (f"{prefix}{wrote:016X}", first)
                first += 1
        self.last_store_timestamp = now
        return ids

    def _write_queue(  # noqa: PLR0917 -- positional: called per batch
        self,
        mf: MappedFile,
        start: int,
        topic_text: str,
        queue_id: int,
        sys_flag: int,
        born: bytes,
        now: int,
        encoded: list[Encoded],
        uniqs: list[str] | None,
    ) -> tuple[int, Written]:
        """Write one queue's ``encoded`` records from ``start`` (room checked) at its next
        queue offsets and leave their :class:`BatchHint`: the first offset, what was written."""
        topic = self._topic(topic_text)
        first = self._take_queue_offsets(topic_text, queue_id, sys_flag, len(encoded))
        shared = Shared(
            MAGIC_V2 if len(topic) > 127 else MAGIC_V1, queue_id,
            stored_sys_flag(sys_flag, born, self._store_host_bytes), born, now,
            self._store_host_bytes, topic,
        )  # fmt: skip
        out = write_batch(mf.buffer, start, mf.file_from_offset, shared, first, encoded)
        mf.wrote_position = out.end
        if self._may_hint(mf.file_from_offset + start):
            self.dispatch_hints.append(BatchHint(
                topic_text, queue_id, now, first, sys_flag, out.units, out.texts, uniqs,
            ))  # fmt: skip
        return first, out

    def _topic(self, topic_text: str) -> bytes:
        """``topic_text`` encoded (remembered)."""
        return self._topic_bytes.get(topic_text) or self._topic_of(topic_text)

    def _topic_of(self, topic_text: str) -> bytes:
        """``topic_text`` encoded, remembered (bounded: a broker has few topics)."""
        if len(self._topic_bytes) >= _MAX_TOPIC_BYTES:
            self._topic_bytes.clear()
        topic = self._topic_bytes[topic_text] = topic_text.encode()
        return topic

    def _take_queue_offsets(self, topic: str, queue_id: int, sys_flag: int, count: int) -> int:
        """Assign ``count`` consecutive queue offsets of ``topic``-``queue_id``; the first is
        returned. Prepared and rolled-back transaction records take none (offset 0)."""
        if is_prepared_or_rollback(sys_flag):
            return 0
        key = queue_key(topic, queue_id)
        table = self.topic_queue_table
        first = table.get(key, 0)
        table[key] = first + count
        return first

    def _may_hint(self, offset: int) -> bool:
        """Whether a record written at ``offset`` may leave its hint (within both bounds)."""
        hints = self.dispatch_hints
        return len(hints) < MAX_DISPATCH_HINTS and (
            not hints or offset - hints[0].commit_log_offset < MAX_HINTED_BYTES
        )

    def _roll_failed(self, error: OSError) -> PutResult:
        """A new segment could not be made: a full disk refuses writes as the clean service's
        disk-full flag does (the flag is set until its next pass finds room); anything else
        is ``CREATE_MAPPED_FILE_FAILED``. Nothing was appended either way."""
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            log.error("create mapped file failed: disk full", directory=str(self.mfq.directory),
                      error=str(error))  # fmt: skip
            self.set_disk_full(True)
            return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        log.error("create mapped file failed", directory=str(self.mfq.directory),
                  error=str(error))  # fmt: skip
        return PutResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED)
