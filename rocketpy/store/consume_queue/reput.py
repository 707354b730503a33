"""The reput task: dispatch CommitLog records to consume queues and dispatchers (store.md 5).

Owns: ``reputFromOffset``, scanning records up to the dispatch bound, building the
:class:`DispatchRequest`, calling every registered dispatcher and the arrival hook. Runs on the
loop; reads are copies of already written, mapped bytes.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from collections.abc import Awaitable, Callable

import structlog

from rocketpy.common.errors import MessageCodecError
from rocketpy.common.message.decoder import read_record
from rocketpy.common.message.properties import tags_code_of
from rocketpy.common.message.record import INT32, is_prepared_or_rollback
from rocketpy.store.commit_log.record import BLANK, BLANK_MAGIC, BLANK_SIZE, DispatchHint
from rocketpy.store.consume_queue.unit import MAX_UNITS_PER_PACK
from rocketpy.store.dispatch import CommitLogDispatcher, DispatchRequest
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)

#: Told of every consumable record dispatched: (topic, queue id, the queue's new max offset,
#: tags code) -- long polling's ``arriving``. Prepared and rolled-back transaction records are
#: not consumable and not told.
ArrivalHook = Callable[[str, int, int, int], None]
#: Builds a record's consume-queue unit from (topic, queue id, commit-log offset, size, tags
#: code, queue offset, store timestamp, sys flag): None when done synchronously, else what to
#: await. Positional: called per record.
PutCq = Callable[[str, int, int, int, int, int, int, int], Awaitable[None] | None]
#: Writes the consume-queue units of a run of records of one queue at once: (topic, queue id,
#: flattened [commit-log offset, size, tags code] per record, first queue offset, last store
#: timestamp); False when it wrote nothing (then each goes through :data:`PutCq`).
PutCqRun = Callable[[str, int, list[int], int, int], bool]


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
        ),
        total,
    )


class ReputService:
    """Dispatches from ``reput_from`` up to ``bound()``; woken after appends and flushes.

    ``hints`` holds the requests the local appends described as they wrote (CommitLog order).
    A hint whose offset is ``reput_from`` is dispatched as is instead of parsing the record back
    from the mapping (about half of the per-message cost); anything else -- replicated bytes,
    recovery, a hint queue that hit its bound -- is scanned. Whoever truncates the commit log
    clears the hints: offsets past the cut are reused by new records.
    """

    def __init__(
        self,
        mfq: MappedFileQueue,
        bound: Callable[[], int],
        *,
        check_crc: bool = False,
        on_arrival: ArrivalHook | None = None,
        hints: deque[DispatchHint] | None = None,
        put_run: PutCqRun | None = None,
    ) -> None:
        self.mfq = mfq
        self.put_run = put_run
        self.bound = bound
        self.check_crc = check_crc
        self.on_arrival = on_arrival
        self.hints: deque[DispatchHint] = deque() if hints is None else hints
        self.reput_from = 0
        # Store timestamp and end offset of the last record dispatched by scanning (replicated
        # bytes on an HA slave, recovery): what a slave's checkpoint learns its
        # physicMsgTimestamp from.
        self.scanned: tuple[int, int] = (0, 0)
        self.dispatchers: list[CommitLogDispatcher] = []
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def register(self, dispatcher: CommitLogDispatcher) -> None:
        """Add a dispatcher; called for every record in CommitLog order."""
        self.dispatchers.append(dispatcher)

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
        start-up re-dispatch goes a slice at a time). ``put_cq`` awaits the CQ append."""
        bound = self.bound() if upto is None else min(self.bound(), upto)
        hints = self.hints
        while self.reput_from < bound:
            if (
                hints
                and hints[0][0] <= self.reput_from
                and not await self._dispatch_hints(put_cq, bound, notify)
            ):
                return
            offset = self.reput_from
            req, size = read_request(self.mfq, offset, check_crc=self.check_crc)
            if size == 0:
                mf = self.mfq.find(offset)
                if mf is None:
                    return
                self.reput_from = mf.file_from_offset + mf.size
                continue
            if req is None:
                # An HA slave receives records cut at frame boundaries: a partial tail is
                # not an error, the rest arrives with the next frame.
                if not self._partial_tail(bound):
                    log.error("reput found an invalid record", offset=offset)
                return
            if offset + size > bound:
                # Only whole records below the bound: in controller mode the bound is the
                # confirm offset, which a slave's ack can leave inside a record.
                return
            pending = put_cq(
                req.topic, req.queue_id, offset, size, req.tags_code,
                req.consume_queue_offset, req.store_timestamp, req.sys_flag,
            )  # fmt: skip
            if pending is not None:
                await pending
            for d in self.dispatchers:
                d.dispatch(
                    req.topic, req.queue_id, offset, size, req.tags_code, req.store_timestamp,
                    req.consume_queue_offset, req.properties, req.sys_flag,
                    req.prepared_transaction_offset,
                )  # fmt: skip
            self.reput_from += size
            self.scanned = (req.store_timestamp, self.reput_from)
            if notify and self.on_arrival is not None and not is_prepared_or_rollback(req.sys_flag):
                self.on_arrival(
                    req.topic, req.queue_id, req.consume_queue_offset + 1, req.tags_code
                )

    async def _dispatch_hints(self, put_cq: PutCq, bound: int, notify: bool) -> bool:
        """The common case, once per locally appended record: the run of hints that starts at
        ``reput_from``, each where the previous one ended, dispatched without parsing and with
        everything bound to locals. Stale hints (below ``reput_from``) are dropped. Returns
        True when the run ended below ``bound`` at a record without a hint (to be scanned),
        False when there is nothing more to do for now (the bound reached, or the next hint
        crosses it). Consecutive records of one queue (a batch) go to :meth:`_dispatch_run`."""
        hints = self.hints
        dispatchers = self.dispatchers
        on_arrival = self.on_arrival if notify else None
        put_run = self.put_run
        offset = self.reput_from
        while hints and offset < bound:
            hint = hints[0]
            hint_offset, size, topic, queue_id, queue_offset, timestamp, text, sys_flag, _ = hint
            if hint_offset < offset:
                hints.popleft()
                continue
            if hint_offset != offset:
                return True
            end = offset + size
            if end > bound:
                return False  # only whole records below the bound, as for scanned ones
            hints.popleft()
            if put_run is not None and hints:
                nxt = hints[0]
                if (
                    nxt[0] == end
                    and nxt[4] == queue_offset + 1
                    and nxt[3] == queue_id
                    and nxt[2] == topic
                    and not is_prepared_or_rollback(sys_flag)
                ):
                    offset = await self._dispatch_run(put_cq, put_run, bound, on_arrival, hint)
                    continue
            tags = tags_code_of(text)
            pending = put_cq(topic, queue_id, offset, size, tags, queue_offset, timestamp, sys_flag)
            if pending is not None:
                await pending
            for d in dispatchers:
                d.dispatch(
                    topic, queue_id, offset, size, tags, timestamp, queue_offset, text,
                    sys_flag, hint[8],
                )  # fmt: skip
            self.reput_from = offset = end
            if on_arrival is not None and not is_prepared_or_rollback(sys_flag):
                on_arrival(topic, queue_id, queue_offset + 1, tags)
        return offset < bound

    async def _dispatch_run(
        self,
        put_cq: PutCq,
        put_run: PutCqRun,
        bound: int,
        on_arrival: ArrivalHook | None,
        first: DispatchHint,
    ) -> int:
        """``first`` (already taken) and the hints after it that continue it: each record where
        the previous ended, in the same queue at the next queue offset, consumable, below
        ``bound`` -- a batch's records. Their consume-queue units are written with one pack
        (per record through ``put_cq`` when the queue cannot take them at once), each record
        goes to the dispatchers, and arrival is told once per tags code with the run's new max
        offset. Returns where the run ended (the new ``reput_from``)."""
        hints = self.hints
        topic, queue_id = first[2], first[3]
        run = [first]
        end = first[0] + first[1]
        next_queue_offset = first[4] + 1
        while hints and len(run) < MAX_UNITS_PER_PACK:
            h = hints[0]
            if (
                h[0] != end
                or h[4] != next_queue_offset
                or h[3] != queue_id
                or h[2] != topic
                or is_prepared_or_rollback(h[7])
                or end + h[1] > bound
            ):
                break
            hints.popleft()
            run.append(h)
            end += h[1]
            next_queue_offset += 1
        units: list[int] = []
        codes: list[int] = []
        for h in run:
            tags = tags_code_of(h[6])
            codes.append(tags)
            units += (h[0], h[1], tags)
        if not put_run(topic, queue_id, units, first[4], run[-1][5]):
            for h, tags in zip(run, codes, strict=True):
                pending = put_cq(topic, queue_id, h[0], h[1], tags, h[4], h[5], h[7])
                if pending is not None:
                    await pending
        for d in self.dispatchers:
            for h, tags in zip(run, codes, strict=True):
                d.dispatch(topic, queue_id, h[0], h[1], tags, h[5], h[4], h[6], h[7], h[8])
        self.reput_from = end
        if on_arrival is not None:
            for tags in dict.fromkeys(codes):
                on_arrival(topic, queue_id, next_queue_offset, tags)
        return end

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
            await self.dispatch_available(put_cq)

    async def stop(self, put_cq: PutCq) -> None:
        """Stop the task after a last dispatch pass. Idempotent."""
        self._stop.set()
        self._wake.set()
        if self._task is not None:
            task, self._task = self._task, None
            await task
        await self.dispatch_available(put_cq)
