"""The CommitLog of DLedger CommitLog mode: sends become DLedger member appends
(dledger-commitlog.md sections 1.3, 1.4 and 4).

Owns: encoding each message into its own record (one entry per message, a batch = one entry
per message), assigning queue offsets (given back when the member refuses the append), mapping
the quorum's answer to a :class:`PutResult` (SEND_OK only once the entry is committed in a
majority), the record's physical offset = entry pos + 48 (``wroteOffset``, msgId), the dispatch
bound = the member's committed position, and :class:`DLedgerReput`, the reput that steps over
whole entries and parses the record inside each. Mirrors upstream's ``DLedgerCommitLog``
(``asyncPutMessage``/``asyncPutMessages``, ``getConfirmOffset``, ``checkMessageAndReturnSize``).
Must not: write the data files itself (the member's log does, and patches PHYSICALOFFSET),
flush (the member flushes every ``flushFileInterval``), or serve anything uncommitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any
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
from rocketpy.dledger.commitlog_member.member import DLedgerAppendError, DLedgerMember
from rocketpy.dledger.commitlog_member.protocol import DLedgerResponseCode
from rocketpy.dledger.commitlog_member.state import Role
from rocketpy.store.commit_log.commit_log import CommitLog, queue_key
from rocketpy.store.commit_log.put_types import (
    Appender,
    MessageBatch,
    MessageToStore,
    PutMessageStatus,
    PutResult,
    batch_fields_fit,
    fields_fit,
)
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.consume_queue.reput import ReputService, scan_record
from rocketpy.store.dispatch import DispatchRequest, Hint
from rocketpy.store.dledger_log.entry import BODY_OFFSET, EntryHeader, check_entry_size

log = structlog.get_logger(__name__)

_SUCCESS = int(DLedgerResponseCode.SUCCESS)  # tested once per send: no enum lookup

#: The quorum's answer -> what the send reports (section 4's table).
_ANSWERS: dict[int, PutMessageStatus] = {
    DLedgerResponseCode.SUCCESS: PutMessageStatus.PUT_OK,
    DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT: PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH,
    DLedgerResponseCode.INCONSISTENT_LEADER: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    DLedgerResponseCode.NOT_LEADER: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    DLedgerResponseCode.LEADER_NOT_READY: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    DLedgerResponseCode.DISK_FULL: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    DLedgerResponseCode.LEADER_PENDING_FULL: PutMessageStatus.OS_PAGE_CACHE_BUSY,
}


def answer_status(code: int) -> PutMessageStatus:
    """The put status of a DLedger append answer (anything unlisted: UNKNOWN_ERROR, the
    outcome is indeterminate)."""
    return _ANSWERS.get(code, PutMessageStatus.UNKNOWN_ERROR)


class _Answers:
    """The quorum's answers to one send's entries (``appendAsLeader``'s futures, joined):
    ``on_result`` gets the send's :class:`PutResult`, once, when every appended entry is
    answered -- PUT_OK, else the first entry's failure. Answers may come before :meth:`expect`
    (a group of one answers during the append)."""

    __slots__ = ("codes", "done", "left", "on_result", "result")

    def __init__(self, on_result: Callable[[PutResult], None]) -> None:
        self.on_result = on_result
        self.done = False
        self.result: PutResult | None = None
        self.left = 0  # answers still missing once expect() told how many (negative before)
        self.codes: dict[int, int] = {}  # entry -> code, only the failures

    def answered_first(self, code: int) -> None:
        """The answer to the only (first) entry (:meth:`at` of entry 0, once per send)."""
        if code != _SUCCESS:
            self.codes[0] = code
        self.left -= 1
        self._settle()

    def at(self, i: int, code: int) -> None:
        """The answer to entry ``i``."""
        if code != _SUCCESS:
            self.codes[i] = code
        self.left -= 1
        self._settle()

    def expect(self, result: PutResult, count: int) -> None:
        """``count`` entries were appended; ``result`` is what the send reports if all
        commit."""
        self.result = result
        self.left += count
        self._settle()

    def _settle(self) -> None:
        result = self.result
        if result is None or self.left or self.done:
            return
        self.done = True
        if self.codes:
            first = min(self.codes)
            result.status = answer_status(self.codes[first])
            log.warning("dledger append not committed", status=result.status.value,
                        first_entry=first, entries=len(self.codes))  # fmt: skip
        self.on_result(result)


def _settle(future: asyncio.Future[PutResult], result: PutResult) -> None:
    if not future.done():
        future.set_result(result)


class DLedgerCommitLog(CommitLog):
    """A :class:`CommitLog` whose appends go through a :class:`DLedgerMember`.

    ``mfq`` is the member's data file queue, so reads by physical offset (pulls, lookups by
    offset) read records straight out of the DLedger data files.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        member: DLedgerMember,
        *,
        store_host: Address,
        clock: Clock,
        flush_executor: Executor,
        alloc_executor: Executor,
        on_append: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(
            config,
            store_host=store_host,
            clock=clock,
            flush_executor=flush_executor,
            alloc_executor=alloc_executor,
            on_append=on_append,
        )
        self.member = member
        self.mfq = member.store.data.queue
        self._dispatched_timestamp = 0
        #: The appending loop, from start(): asyncio.get_running_loop() is a getpid() system
        #: call, once per send otherwise.
        self._loop: asyncio.AbstractEventLoop | None = None
        # Hints describe what this member appended as leader; once it stops leading, its
        # uncommitted tail may be truncated and replaced by another leader's entries.
        member.add_role_change_handler(self._role_changed)

    def _role_changed(self, term: int, role: Role) -> None:
        del term
        if role is not Role.LEADER:
            self.dispatch_hints.clear()

    # -- positions -------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """``getMaxOffset``: the committed position (the end of the last committed entry)."""
        return max(self.member.store.committed_pos, 0)

    @property
    def flushed_offset(self) -> int:
        """The committed position: the member flushes its data every ``flushFileInterval``
        (10 ms), so flush lag is not tracked separately."""
        return self.max_offset

    @flushed_offset.setter
    def flushed_offset(self, value: int) -> None:
        del value  # the base class and the store start set it; the member owns flushing

    @property
    def sync_flush(self) -> bool:
        """``flushDiskType`` is ignored in DLedger mode: a send waits for the quorum."""
        return False

    @property
    def flushed_store_timestamp(self) -> int:
        """Store time of the last record dispatched (committed, and flushed by the member
        every 10 ms): the checkpoint's ``physicMsgTimestamp``."""
        return max(self._dispatched_timestamp, self.replicated_timestamp()[0])

    @flushed_store_timestamp.setter
    def flushed_store_timestamp(self, value: int) -> None:
        self._dispatched_timestamp = value

    def confirm_offset(self) -> int:
        """Dispatch bound: the committed position (uncommitted entries are never dispatched)."""
        return self.max_offset

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Take appends (no flush task: the member flushes)."""
        with contextlib.suppress(RuntimeError):  # started on the loop that will append
            self._loop = asyncio.get_running_loop()
        self.writable = True

    async def stop(self) -> None:
        """Refuse appends. Idempotent."""
        self.writable = False

    async def append_replicated(self, start_offset: int, data: bytes) -> None:
        """Not in DLedger mode: followers get entries from the member's pushes."""
        del start_offset, data
        raise StoreError("DLedger CommitLog mode replicates through the DLedger member")

    def read_raw(self, offset: int, max_bytes: int) -> bytes | None:
        """Not in DLedger mode (no classic HA)."""
        del offset, max_bytes
        return None

    # -- appends ---------------------------------------------------------------------------

    def put_message(
        self, msg: MessageToStore, appended: Callable[[], None] | None = None
    ) -> Coroutine[Any, Any, PutResult]:
        """Append ``msg`` as one entry and wait for the quorum's answer."""
        return self._put_entries(msg, appended)

    def put_message_nowait(self, msg: MessageToStore) -> PutResult | None:
        """Always None: every send waits for the quorum."""
        del msg
        return None

    def nowait_appender(self) -> Appender | None:
        """None, as :meth:`put_message_nowait`: no send is answered before its quorum."""
        return None

    def put_batch(
        self, batch: MessageBatch, appended: Callable[[], None] | None = None
    ) -> Coroutine[Any, Any, PutResult]:
        """Append each message of ``batch`` as its own entry; PUT_OK once all are committed."""
        return self._put_entries(batch, appended)

    def put_batch_nowait(self, batch: MessageBatch) -> PutResult | None:
        """Always None, as :meth:`put_message_nowait`."""
        del batch
        return None

    async def _put_entries(
        self, what: MessageToStore | MessageBatch, appended: Callable[[], None] | None
    ) -> PutResult:
        soon = self.put_soon(what)
        if isinstance(soon, PutResult):
            return soon
        if appended is not None:
            appended()
        return await soon

    def put_soon(
        self, what: MessageToStore | MessageBatch
    ) -> PutResult | asyncio.Future[PutResult]:
        """Append ``what`` (one entry per message) now; the refusal, or the future of the
        result once the quorum answered every entry (PUT_OK, else the first entry's failure).
        No coroutine, no timer and no future per entry: the member answers every append
        within ``maxWaitAckTimeMs`` (502), at a term change (501) or at its shutdown (500)."""
        loop = self._loop or asyncio.get_running_loop()
        future: asyncio.Future[PutResult] = loop.create_future()
        appended = self.put_then(what, functools.partial(_settle, future))
        return appended if isinstance(appended, PutResult) else future

    def put_then(
        self, what: MessageToStore | MessageBatch, on_result: Callable[[PutResult], None]
    ) -> PutResult | bool:
        """:meth:`put_soon` answered through ``on_result``, called once from the quorum
        check that commits the last entry (in the read of the push answer that moved the
        quorum), or from an append refused after the first entry: the send's answer is
        queued there, not from a future's done callback a loop turn later. Returns the
        refusal (``on_result`` never called) or True."""
        if not self.writable or self.disk_full:
            return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        refused = self._append(what, _Answers(on_result))
        return refused if refused is not None else True

    def _append(self, what: MessageToStore | MessageBatch, answers: _Answers) -> PutResult | None:
        """Encode, take queue offsets and append every entry, with no await in between (the
        loop is the only writer): a refusal of the first entry gives the offsets back. Each
        appended record leaves its dispatch hint, so the reput need not parse it back."""
        if not isinstance(what, MessageBatch):
            return self._append_one(what, answers)
        if not what.items or not batch_fields_fit(what) or what.sys_flag & TRANSACTION_TYPE_MASK:
            # A batch is never transactional (asyncPutMessages), as in CommitLog.
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        items = what.items
        records: list[bytearray] = []
        now = self.clock.wall_ms()
        for flag, body, text in items:
            rec = self._record(what, flag, body, text, 0, now)
            if isinstance(rec, PutResult):
                return rec
            records.append(rec)
        sys_flag = what.sys_flag
        topic, queue_id = what.topic, what.queue_id
        first_queue_offset = self._take_queue_offsets(topic, queue_id, sys_flag, len(records))
        headers: list[EntryHeader] = []
        queue_offset = first_queue_offset
        hinted: bool | None = None  # the whole batch, or none: decided at its first entry
        single = len(records) == 1
        for i, rec in enumerate(records):
            try:
                header = self.member.append_then(
                    rec, answers.answered_first if single else functools.partial(answers.at, i),
                    queue_offset=queue_offset,
                )  # fmt: skip
            except DLedgerAppendError as e:
                # The offsets of entries not appended are not used.
                self.topic_queue_table[queue_key(topic, queue_id)] = queue_offset
                if not headers:
                    log.info("dledger append refused", code=e.code, topic=topic)
                    return PutResult(PutMessageStatus.OS_PAGE_CACHE_BUSY)
                break
            headers.append(header)
            # scanned=True: what the checkpoint's physicMsgTimestamp follows. Every record
            # the DLedger reput dispatches is committed, and flushed by the member within
            # flushFileInterval, hinted or parsed back alike.
            if hinted is None:
                hinted = self._may_hint(header.pos + BODY_OFFSET)
            if hinted:
                self._hint(what, header.pos + BODY_OFFSET, len(rec), items[i][2], now,
                           queue_offset, 0)  # fmt: skip
            queue_offset += 1
        self.last_store_timestamp = now
        self._on_append()
        answers.expect(self._result(headers, records, first_queue_offset, now), len(headers))
        return None

    def _append_one(self, msg: MessageToStore, answers: _Answers) -> PutResult | None:
        """:meth:`_append` of one message (a send's usual case): the same steps, without the
        lists, the loop and the joins of a batch."""
        if not fields_fit(msg):
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        now = self.clock.wall_ms()
        prepared = msg.prepared_transaction_offset
        rec = self._record(msg, msg.flag, msg.body, msg.properties, prepared, now)
        if isinstance(rec, PutResult):
            return rec
        sys_flag, topic, queue_id = msg.sys_flag, msg.topic, msg.queue_id
        step = 0 if is_prepared_or_rollback(sys_flag) else 1
        queue_offset = self._take_queue_offsets(topic, queue_id, sys_flag, 1)
        try:
            header = self.member.append_then(
                rec, answers.answered_first, queue_offset=queue_offset if step else None
            )
        except DLedgerAppendError as e:
            if step:  # the offset is not used
                self.topic_queue_table[queue_key(topic, queue_id)] = queue_offset
            log.info("dledger append refused", code=e.code, topic=topic)
            return PutResult(PutMessageStatus.OS_PAGE_CACHE_BUSY)
        offset, size = header.pos + BODY_OFFSET, len(rec)
        if self._may_hint(offset):
            self._hint(msg, offset, size, msg.properties, now, queue_offset * step, prepared)
        self.last_store_timestamp = now
        self._on_append()
        answers.expect(PutResult(
            PutMessageStatus.PUT_OK, offset, size, f"{self._msg_id_prefix}{offset:016X}",
            queue_offset, now, 1,
        ), 1)  # fmt: skip
        return None

    def _record(  # noqa: PLR0917 -- positional: called per record
        self, what: MessageToStore | MessageBatch, flag: int, body: bytes, text: str,
        prepared: int, now: int,
    ) -> bytearray | PutResult:  # fmt: skip
        """One message's record (:meth:`_encode`), or the refusal of a body or properties
        over their limits."""
        if len(body) > self.config.max_message_size:
            return PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        props = text.encode()
        if len(props) > MAX_PROPERTIES_BYTES:
            return PutResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        return self._encode(what, flag, body, props, prepared, now)

    def _hint(  # noqa: PLR0917 -- positional: called per record
        self, what: MessageToStore | MessageBatch, offset: int, size: int, text: str, now: int,
        queue_offset: int, prepared: int,
    ) -> None:  # fmt: skip
        """Leave the dispatch hint of the record just appended at ``offset``."""
        self.dispatch_hints.append(DispatchRequest(
            what.topic, what.queue_id, offset, size, tags_code_of(text), now, queue_offset,
            text, what.sys_flag, prepared, scanned=True,
        ))  # fmt: skip

    def _result(
        self, pending: list[EntryHeader], records: list[bytearray], queue_offset: int, now: int
    ) -> PutResult:
        """What the send reports once ``pending`` (the first entries of ``records``) are
        appended: OS_PAGE_CACHE_BUSY when the member refused the rest."""
        prefix = self._msg_id_prefix
        first_offset = pending[0].pos + BODY_OFFSET
        if len(pending) == 1:  # a single message: no joins
            ids, total = f"{prefix}{first_offset:016X}", len(records[0])
        else:
            ids = offset_msg_ids(prefix, [e.pos + BODY_OFFSET for e in pending])
            total = sum(len(r) for r in records[: len(pending)])
        result = PutResult(
            PutMessageStatus.PUT_OK, first_offset, total, ids, queue_offset, now, len(pending)
        )
        if len(pending) < len(records):
            result.status = PutMessageStatus.OS_PAGE_CACHE_BUSY
        return result

    def _encode(  # noqa: PLR0917 -- positional: called per record
        self, what: MessageToStore | MessageBatch, flag: int, body: bytes, props: bytes,
        prepared: int, now: int,
    ) -> bytearray:  # fmt: skip
        """One record, as the CommitLog lays it out; QUEUEOFFSET and PHYSICALOFFSET are
        written by the log at append."""
        topic = self._topic_bytes.get(what.topic) or self._topic_of(what.topic)
        born = pack_address(what.born_host)
        store = self._store_host_bytes
        topic_len = len(topic)
        st = record_struct(len(born), len(store), len(body), topic_len, len(props), topic_len > 127)
        buf = bytearray(st.size)
        st.pack_into(
            buf, 0, st.size, MAGIC_V2 if topic_len > 127 else MAGIC_V1,
            crc32(body) & 0x7FFFFFFF, what.queue_id, flag, 0, 0,
            stored_sys_flag(what.sys_flag, born, store), what.born_timestamp, born, now, store,
            what.reconsume_times, prepared, len(body), body, topic_len, topic, len(props), props,
        )  # fmt: skip
        return buf


class DLedgerReput(ReputService):
    """The reput over DLedger data files: positions are entry positions; each step takes the
    record at entry pos + 48 -- the leader's dispatch hint for it, else parsed back
    (``DLedgerCommitLog``'s ``checkMessageAndReturnSize``) -- and moves to the next entry,
    rolling to the next file at a blank tail. The bound is the committed position; a position
    below the first data file moves to it."""

    def position_of(self, commit_log_offset: int) -> int:
        """The entry holding the record at ``commit_log_offset`` (entry pos + 48)."""
        return commit_log_offset - BODY_OFFSET

    def _take(self, offset: int, bound: int) -> Hint | None:
        """The hint of the record of the entry at ``offset`` (a hint's offset is the record's,
        entry pos + 48), else :meth:`_take_scanned`; hints of entries before ``offset`` are
        stale and dropped."""
        hints = self.hints
        record = offset + BODY_OFFSET
        while hints:
            hint = hints[0]
            if hint.commit_log_offset == record:
                if record + hint.msg_size > bound:  # whole committed entries only
                    return None
                hints.popleft()
                return hint
            if hint.commit_log_offset > record:
                break
            hints.popleft()
        return self._take_scanned(offset, bound)

    def _take_scanned(self, offset: int, bound: int) -> DispatchRequest | None:
        files = self.mfq.files
        if files and offset == self.reput_from and offset < files[0].file_from_offset:
            # A follower TRUNCATEd to a leader's first entry (its head deleted) or retention
            # went past a stopped reput: ReputMessageService jumps to the min offset.
            first = files[0].file_from_offset
            log.warning("The reputFromOffset is smaller than minPyOffset, the commitlog has "
                        "expired", reput_from=offset, min_offset=first)  # fmt: skip
            self.reput_from = offset = first
        while offset < bound:
            mf = self.mfq.find(offset)
            if mf is None:
                return None
            rel = offset - mf.file_from_offset
            size = check_entry_size(mf.buffer, rel)
            if size == 0:  # the blank tail: the next file's first entry
                if offset != self.reput_from:
                    return None
                self.reput_from = offset = mf.file_from_offset + mf.size
                continue
            if size < 0 or offset + size > bound:
                if size < 0 and offset == self.reput_from:
                    log.error("dledger reput found no entry", offset=offset)
                return None
            view = mf.view(rel + BODY_OFFSET, size - BODY_OFFSET)
            try:
                req, _ = scan_record(view, offset + BODY_OFFSET, check_crc=self.check_crc)
            finally:
                view.release()
            if req is None and offset == self.reput_from:
                log.error("dledger reput found an invalid record", offset=offset + BODY_OFFSET)
            return req
        return None
