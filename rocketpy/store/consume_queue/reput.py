"""The reput task: dispatch CommitLog records to consume queues and dispatchers (store.md 5).

Owns: ``reputFromOffset``; taking each record's :class:`DispatchRequest` up to the dispatch bound
(the local append's hint, or scanned back from the mapping); grouping a queue's consecutive
records into runs; writing their consume-queue units; calling every registered dispatcher and
the arrival hook. Mirrors ``DefaultMessageStore.ReputMessageService.doReput``. Runs on the loop;
reads are copies of already written, mapped bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections import deque
from collections.abc import Awaitable, Callable

import structlog

from rocketpy.common.errors import MessageCodecError
from rocketpy.common.message.decoder import read_record
from rocketpy.common.message.properties import tags_code_of
from rocketpy.common.message.record import INT32, is_prepared_or_rollback
from rocketpy.store.commit_log.record import BLANK, BLANK_MAGIC, BLANK_SIZE
from rocketpy.store.consume_queue.unit import MAX_UNITS_PER_PACK
from rocketpy.store.dispatch import (
    BatchHint,
    BoundedDispatcher,
    CommitLogDispatcher,
    DispatchRequest,
    Hint,
)
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)

#: How long the reput waits before trying again a consume-queue write that found no disk blocks.
DISK_RETRY_S = 1.0
#: The start-up re-dispatch goes back this far at most for a lagging dispatcher.
CATCH_UP_MAX = 1 << 30
#: Records in one dispatch pass at most (the dispatchers and arrival are told once per pass).
PASS_RECORDS = 1024

#: Told of every consumable record dispatched: (topic, queue id, the queue's new max offset,
#: tags code) -- long polling's ``arriving``. Prepared and rolled-back transaction records are
#: not consumable and not told.
ArrivalHook = Callable[[str, int, int, int], None]
#: Builds a record's consume-queue unit: None when done synchronously, else what to await.
PutCq = Callable[[DispatchRequest], Awaitable[None] | None]
#: Writes the consume-queue units of a run of consumable records of one queue at consecutive
#: queue offsets (a batch) at once; False when it wrote nothing (then each goes through
#: :data:`PutCq`).
PutCqRun = Callable[[list[DispatchRequest]], bool]
#: :data:`PutCqRun` for a hinted batch (its units as the hint holds them).
PutCqBatch = Callable[[BatchHint], bool]


def read_request(
    mfq: MappedFileQueue, offset: int, *, check_crc: bool
) -> tuple[DispatchRequest | None, int]:
    """Parse the record at ``offset``: (request, size); (None, 0) blank; (None, -1) invalid."""
    mf = mfq.find(offset)
    if mf is None:
        return None, -1
    pos = offset - mf.file_from_offset
    available = mf.wrote_position - pos
    if available < BLANK_SIZE:
        return None, -1
    view = mf.view(pos, available)
    try:
        return scan_record(view, offset, check_crc=check_crc)
    finally:
        view.release()


def valid_end(mfq: MappedFileQueue, start: int) -> int:
    """End of the last whole record with a valid CRC from ``start`` up to the written end
    (``AutoSwitchHAClient.truncateInvalidMsg``'s walk); a blank end-of-file record moves on to
    the next segment."""
    top = mfq.max_offset
    offset = start
    while offset < top:
        req, size = read_request(mfq, offset, check_crc=True)
        if size == 0:  # blank end-of-file record: the next segment starts the next record
            mf = mfq.find(offset)
            if mf is None:
                break
            offset = mf.file_from_offset + mf.size
            continue
        if req is None:
            break
        offset += size
    return min(offset, top)


def scan_record(
    view: memoryview, offset: int, *, check_crc: bool
) -> tuple[DispatchRequest | None, int]:
    """``checkMessageAndReturnSize`` on the record at the start of ``view``, decoding only what a
    dispatch needs (the body is not copied; its CRC is checked when ``check_crc``): (request,
    size); (None, 0) blank; (None, -1) invalid or incomplete."""
    try:
        if BLANK.unpack_from(view, 0)[1] == BLANK_MAGIC:
            return None, 0
        (
            total, _, _, queue_id, _, queue_offset, _, sys_flag, _, _, store_ts, _, _, prepared,
            _, _, topic, properties,
        ) = read_record(view, 0, check_crc=check_crc)  # fmt: skip
    except (struct.error, MessageCodecError):
        return None, -1
    return (
        DispatchRequest(
            topic=topic,
            queue_id=queue_id,
            commit_log_offset=offset,
            msg_size=total,
            tags_code=tags_code_of(properties),
            store_timestamp=store_ts,
            consume_queue_offset=queue_offset,
            properties=properties,
            sys_flag=sys_flag,
            prepared_transaction_offset=prepared,
            scanned=True,
        ),
        total,
    )


def _tell_arrival(done: list[Hint], on_arrival: ArrivalHook) -> None:
    """Arrival for the consumable records of a pass: once per queue and tags code, each with
    the queue's new max offset (what long polling compares its pulls with)."""
    tags_of: dict[tuple[str, int], dict[int, None]] = {}
    max_of: dict[tuple[str, int], int] = {}
    for r in done:
        if is_prepared_or_rollback(r.sys_flag):
            continue
        queue = (r.topic, r.queue_id)
        tags = tags_of.get(queue)
        if tags is None:
            tags = tags_of[queue] = {}
        if isinstance(r, BatchHint):
            max_of[queue] = r.consume_queue_offset + len(r.properties)
            tags.update(dict.fromkeys(r.units[2::3]))
        else:
            max_of[queue] = r.consume_queue_offset + 1
            tags[r.tags_code] = None
    for queue, tags in tags_of.items():
        for tags_code in tags:
            on_arrival(queue[0], queue[1], max_of[queue], tags_code)


async def _put_each(requests: list[DispatchRequest], put_cq: PutCq) -> bool:
    """Each record's consume-queue unit through ``put_cq``, in order (what a run or a batch
    falls back to when its units cannot be packed at once). Returns whether it awaited."""
    awaited = False
    for req in requests:
        pending = put_cq(req)
        if pending is not None:
            awaited = True
            await pending
    return awaited


class ReputService:
    """Dispatches from ``reput_from`` up to ``bound()``; woken after appends and flushes.

    One loop (:meth:`dispatch_available`): take the request of the record at ``reput_from``,
    gather the records after it that continue it in the same queue (a batch) into a run, write
    the run's consume-queue units, give each record to the dispatchers, tell arrival, move
    ``reput_from`` past the run. A record's request is its hint when one starts there --
    ``hints`` holds the requests the local appends built as they wrote (CommitLog order), so
    the reput need not parse the record back (about half of the per-message cost) -- else it is
    scanned from the mapping (replicated bytes, recovery, a hint queue that hit its bound).
    Whoever truncates the commit log clears the hints: offsets past the cut are reused by new
    records.
    """

    def __init__(
        self,
        mfq: MappedFileQueue,
        bound: Callable[[], int],
        *,
        check_crc: bool = False,
        on_arrival: ArrivalHook | None = None,
        hints: deque[Hint] | None = None,
        put_run: PutCqRun | None = None,
        put_batch: PutCqBatch | None = None,
    ) -> None:
        self.mfq = mfq
        self.put_run = put_run
        self.put_batch = put_batch
        self.bound = bound
        self.check_crc = check_crc
        self.on_arrival = on_arrival
        self.hints: deque[Hint] = deque() if hints is None else hints
        self.reput_from = 0
        # Store timestamp and end offset of the last record dispatched by scanning (replicated
        # bytes on an HA slave, recovery): what a slave's checkpoint learns its
        # physicMsgTimestamp from.
        self.scanned: tuple[int, int] = (0, 0)
        self.dispatchers: list[CommitLogDispatcher] = []
        # Dispatchers that may fall behind (an index worker): the reput waits for them.
        self.bounded: list[BoundedDispatcher] = []
        # Restarted dispatchers to go back for (rewind), with the log's first byte then.
        self._rewinds: list[tuple[BoundedDispatcher, int]] = []
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def register(self, dispatcher: CommitLogDispatcher) -> None:
        """Add a dispatcher; called for every record in CommitLog order. One that also has
        ``backlogged()`` and ``drain()`` (:class:`BoundedDispatcher`) is waited for before a
        pass while it reports a backlog."""
        self.dispatchers.append(dispatcher)
        if isinstance(dispatcher, BoundedDispatcher):
            self.bounded.append(dispatcher)

    def catch_up(self, min_offset: int) -> None:
        """Before the start-up re-dispatch: begin it at the last record a lagging dispatcher
        (the index worker) holds when the consume queues are ahead of it -- a kill -9 loses
        what the broker had not yet handed over -- but not before ``min_offset`` (the log's
        first byte) nor more than :data:`CATCH_UP_MAX` bytes back (a dispatcher that far
        behind lost its files, not a few passes; one holding nothing starts from the first
        byte within that bound). Records the consume queues hold are skipped there."""
        for d in self.bounded:
            self._back_to(d, min_offset)

    def rewind(self, dispatcher: BoundedDispatcher, min_offset: int) -> None:
        """``dispatcher`` was restarted (an index worker replaced after it died): what was
        handed to the one that died after its ``last_held()`` record is gone, so dispatch
        again from there, as :meth:`catch_up` does at start-up. Done between passes (a pass
        under way would move ``reput_from`` past it again), then ``dispatcher.rewound()``:
        until then it drops what it is given, which lies past the rewind. Every dispatcher
        sees the records again; the consume queues skip the units they hold."""
        self._rewinds.append((dispatcher, min_offset))
        self.wake()

    def _apply_rewinds(self) -> None:
        rewinds, self._rewinds = self._rewinds, []
        for d, min_offset in rewinds:
            self._back_to(d, min_offset)
            d.rewound()

    def _back_to(self, d: BoundedDispatcher, min_offset: int) -> None:
        """``reput_from`` back to ``d``'s last record, within the limits of :meth:`catch_up`;
        to the log's first record for one that holds none (a worker whose files are gone, or
        that died before its first)."""
        held = d.last_held()
        held = self.position_of(held) if held >= 0 else max(0, min_offset)
        if not max(0, min_offset) <= held < self.reput_from:
            return
        if self.reput_from - held > CATCH_UP_MAX:
            log.warning("dispatcher too far behind to catch up, its records stay out",
                        dispatcher=type(d).__name__, held=held,
                        reput_from=self.reput_from)  # fmt: skip
            return
        log.info("re-dispatch from a dispatcher's last record", held=held,
                 reput_from=self.reput_from, dispatcher=type(d).__name__)  # fmt: skip
        self.reput_from = held

    def position_of(self, commit_log_offset: int) -> int:
        """Where the reput starts to dispatch the record at ``commit_log_offset`` (the same
        offset here; an entry's position in DLedger mode)."""
        return commit_log_offset

    def wake(self) -> None:
        """New bytes may be dispatchable."""
        self._wake.set()

    def behind(self) -> int:
        """Bytes written but not yet dispatched."""
        return max(0, self.bound() - self.reput_from)

    async def dispatch_available(
        self, put_cq: PutCq, *, notify: bool = True, upto: int | None = None
    ) -> None:
        """Dispatch every whole record below the bound (and below ``upto`` when given: the
        start-up re-dispatch goes a slice at a time), a pass at a time (:meth:`_pass`).
        ``put_cq`` builds a record's consume-queue unit (awaited when it returns an
        awaitable); ``notify=False`` tells arrival nothing."""
        bound = self.bound() if upto is None else min(self.bound(), upto)
        on_arrival = self.on_arrival if notify else None
        if self._rewinds:
            self._apply_rewinds()
        req = self._take(self.reput_from, bound)
        while req is not None:
            if self._rewinds:  # asked for during the last pass
                self._apply_rewinds()
                req = self._take(self.reput_from, bound)
                continue
            if self.bounded and any(d.backlogged() for d in self.bounded):
                for d in self.bounded:
                    await d.drain()
                req = self._take(self.reput_from, bound)  # a truncation may have come
                if req is None:
                    break
            req = await self._pass(req, bound, put_cq, on_arrival)

    async def _pass(
        self,
        req: Hint,
        bound: int,
        put_cq: PutCq,
        on_arrival: ArrivalHook | None,
    ) -> Hint | None:
        """One pass from ``req`` (the record at ``reput_from``): the consume-queue units of the
        records from it on (a run of :meth:`_gather` with one pack) until the bound,
        :data:`PASS_RECORDS` records or an await, then :meth:`_dispatched`. Returns the request
        the next pass starts with: taken again from ``reput_from`` after an await (what was
        taken before it may lie past a truncation made meanwhile)."""
        done: list[Hint] = []
        records = 0
        while True:
            if isinstance(req, BatchHint):
                done.append(req)
                records += len(req.properties)
                awaited = await self._put_cq_batch(req, put_cq)
                after = None
            else:
                run, after = self._gather(req, bound)
                if run is not None:
                    done += run
                    records += len(run)
                    awaited = await self._put_cq_run(run, put_cq)
                else:
                    done.append(req)
                    records += 1
                    pending = put_cq(req)
                    awaited = pending is not None
                    if pending is not None:
                        await pending
            if awaited or records >= PASS_RECORDS:
                break
            if after is None:
                after = self._take(done[-1].commit_log_offset + done[-1].msg_size, bound)
                if after is None:
                    break
            req = after
        self._dispatched(done, on_arrival)
        if awaited or after is None:
            return self._take(self.reput_from, bound)
        return after

    def _dispatched(self, done: list[Hint], on_arrival: ArrivalHook | None) -> None:
        """A pass whose units are written: to each dispatcher (``dispatch_run`` when it has
        one and the pass holds more than one record, else ``dispatch`` per record),
        ``reput_from`` past it, and arrival told once per queue and tags code with the queue's
        new max offset."""
        last = done[-1]
        each: list[DispatchRequest] | None = None
        for d in self.dispatchers:
            dispatch_run = (
                getattr(d, "dispatch_run", None)
                if len(done) > 1 or isinstance(last, BatchHint)
                else None
            )
            if dispatch_run is not None:  # optional (CommitLogDispatcher)
                dispatch_run(done)
                continue
            if each is None:
                each = []
                for r in done:
                    if isinstance(r, BatchHint):
                        each += r.requests()
                    else:
                        each.append(r)
            for r in each:
                d.dispatch(r)
        self.reput_from = last.commit_log_offset + last.msg_size
        for r in reversed(done):
            if r.scanned:
                self.scanned = (r.store_timestamp, r.commit_log_offset + r.msg_size)
                break
        if on_arrival is None:
            return
        if len(done) > 1 or isinstance(last, BatchHint):
            _tell_arrival(done, on_arrival)
        elif isinstance(last, DispatchRequest) and not is_prepared_or_rollback(last.sys_flag):
            on_arrival(last.topic, last.queue_id, last.consume_queue_offset + 1, last.tags_code)

    def _take(self, offset: int, bound: int) -> Hint | None:
        """The request of the whole record at ``offset`` ending at or below ``bound``: its hint
        (a whole hinted batch when it ends there too), else scanned (:meth:`_take_scanned`).
        None when there is none (yet)."""
        hints = self.hints
        if hints:
            hint = hints[0]
            if hint.commit_log_offset == offset:
                # Only whole records below the bound, as for scanned ones.
                if offset + hint.msg_size <= bound:
                    hints.popleft()
                    return hint
                if not isinstance(hint, BatchHint):
                    return None
                # A bound inside a batch (controller mode's confirm offset): record by record.
                hints.popleft()
                hints.extendleft(reversed(hint.requests()))
                return self._take(offset, bound)
        return self._take_scanned(offset, bound)

    def _take_scanned(self, offset: int, bound: int) -> Hint | None:
        """:meth:`_take` without a hint at ``offset``: drop stale hints (below ``offset``), then
        the hint if one starts there, else the record parsed back from the mapping. None for
        the bound, an invalid record or an end-of-file blank. At ``reput_from`` (nothing taken
        ahead of it) a blank moves ``reput_from`` to the next segment, and an invalid record
        that is not a partial tail is logged."""
        hints = self.hints
        while offset < bound:
            while hints and hints[0].commit_log_offset < offset:
                stale = hints.popleft()
                if (
                    isinstance(stale, BatchHint)
                    and stale.commit_log_offset + stale.msg_size > offset
                ):
                    hints.extendleft(reversed(stale.requests()))  # the records from offset on
            if hints and hints[0].commit_log_offset == offset:
                return self._take(offset, bound)
            req, size = read_request(self.mfq, offset, check_crc=self.check_crc)
            if req is not None:
                # In controller mode the bound is the confirm offset, which a slave's ack can
                # leave inside a record.
                return req if offset + size <= bound else None
            if offset != self.reput_from:
                return None  # ends a run; looked at again once the run is dispatched
            if size != 0:
                # An HA slave receives records cut at frame boundaries: a partial tail is not
                # an error, the rest arrives with the next frame.
                if not self._partial_tail(bound):
                    log.error("reput found an invalid record", offset=offset)
                return None
            mf = self.mfq.find(offset)  # the end-of-file blank: the next segment
            if mf is None:
                return None
            self.reput_from = offset = mf.file_from_offset + mf.size
        return None

    def _gather(
        self, first: DispatchRequest, bound: int
    ) -> tuple[list[DispatchRequest] | None, Hint | None]:
        """The run ``first`` starts: ``first`` and the records after it that continue it, each
        where the previous one ended, in the same queue at the next queue offset, consumable,
        at most ``MAX_UNITS_PER_PACK`` (a batch's records, whose units :data:`PutCqRun` writes
        with one pack); None when ``first`` stands alone. Also the request taken after the
        run, if any."""
        if self.put_run is None:
            return None, None
        topic, queue_id = first.topic, first.queue_id
        end = first.commit_log_offset + first.msg_size
        queue_offset = first.consume_queue_offset + 1
        run: list[DispatchRequest] | None = None
        while (req := self._take(end, bound)) is not None:
            if (
                isinstance(req, BatchHint)
                or req.consume_queue_offset != queue_offset
                or req.queue_id != queue_id
                or req.topic != topic
                or is_prepared_or_rollback(req.sys_flag)
            ):
                return run, req
            if run is None:
                if is_prepared_or_rollback(first.sys_flag):
                    return None, req
                run = [first]
            elif len(run) == MAX_UNITS_PER_PACK:
                return run, req
            run.append(req)
            end += req.msg_size
            queue_offset += 1
        return run, None

    async def _put_cq_run(self, run: list[DispatchRequest], put_cq: PutCq) -> bool:
        """The consume-queue units of a run of :meth:`_gather`: with one pack, else (the
        queue cannot take them at once) per record through ``put_cq``. Returns whether it
        awaited."""
        if self.put_run is not None and self.put_run(run):
            return False
        return await _put_each(run, put_cq)

    async def _put_cq_batch(self, hint: BatchHint, put_cq: PutCq) -> bool:
        """:meth:`_put_cq_run` for a hinted batch. Returns whether it awaited."""
        if self.put_batch is not None and self.put_batch(hint):
            return False
        return await _put_each(hint.requests(), put_cq)

    def _partial_tail(self, bound: int) -> bool:
        mf = self.mfq.find(self.reput_from)
        if mf is None:
            return False
        written_end = mf.file_from_offset + mf.wrote_position
        head = self.mfq.read(self.reput_from, 4)
        if head is None:
            return written_end - self.reput_from < 4
        total: int = INT32.unpack_from(head, 0)[0]
        return total > 0 and self.reput_from + total > min(bound, written_end)

    def start(self, put_cq: PutCq) -> None:
        """Start the background task."""
        self._task = asyncio.get_running_loop().create_task(self._run(put_cq), name="store/reput")

    async def _run(self, put_cq: PutCq) -> None:
        while not self._stop.is_set():
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.dispatch_available(put_cq)
            except OSError as e:
                # No disk blocks for a consume-queue unit (a full disk): nothing past
                # reput_from was dispatched; try again once the clean pass may have made room.
                log.warning("reput cannot write a consume queue, retrying in 1 s",
                            reput_from=self.reput_from, error=str(e))  # fmt: skip
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), DISK_RETRY_S)
                self._wake.set()

    async def stop(self, put_cq: PutCq) -> None:
        """Stop the task after a last dispatch pass. Idempotent."""
        self._stop.set()
        self._wake.set()
        if self._task is not None:
            task, self._task = self._task, None
            await task
        await self.dispatch_available(put_cq)
