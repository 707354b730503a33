"""The reput task: dispatch CommitLog records to consume queues and dispatchers (store.md 5).

Owns: ``reputFromOffset``, scanning records up to the dispatch bound, building the
:class:`DispatchRequest`, calling every registered dispatcher and the arrival hook. Runs on the
loop; reads are copies of already written, mapped bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from rocketpy.store.commit_log.record import (
    BLANK_MAGIC,
    BLANK_SIZE,
    INT32,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    CheckStatus,
    check_record,
    tags_code,
)
from rocketpy.store.dispatch import CommitLogDispatcher, DispatchRequest
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)

ArrivalHook = Callable[[str, int, int], None]


def read_request(
    mfq: MappedFileQueue, offset: int, *, check_crc: bool
) -> tuple[DispatchRequest | None, int]:
    """Parse the record at ``offset``: (request, size); (None, 0) blank; (None, -1) invalid."""
    head = mfq.read(offset, BLANK_SIZE)
    if head is None:
        return None, -1
    total, magic = INT32.unpack_from(head, 0)[0], INT32.unpack_from(head, 4)[0]
    if magic == BLANK_MAGIC:
        return None, 0
    raw = mfq.read(offset, total) if total > 0 else None
    if raw is None:
        return None, -1
    check = check_record(raw, check_crc=check_crc)
    if check.status is not CheckStatus.VALID or check.record is None:
        return None, -1
    rec = check.record
    props = rec.property_map()
    return (
        DispatchRequest(
            topic=rec.topic,
            queue_id=rec.queue_id,
            commit_log_offset=offset,
            msg_size=check.size,
            tags_code=tags_code(props.get(PROPERTY_TAGS)),
            store_timestamp=rec.store_timestamp,
            consume_queue_offset=rec.queue_offset,
            keys=props.get(PROPERTY_KEYS, ""),
            uniq_key=props.get(PROPERTY_UNIQ_KEY),
            sys_flag=rec.sys_flag,
            prepared_transaction_offset=rec.prepared_transaction_offset,
            properties=props,
        ),
        check.size,
    )


class ReputService:
    """Dispatches from ``reput_from`` up to ``bound()``; woken after appends and flushes."""

    def __init__(
        self,
        mfq: MappedFileQueue,
        bound: Callable[[], int],
        *,
        check_crc: bool = False,
        on_arrival: ArrivalHook = lambda topic, queue_id, offset: None,
    ) -> None:
        self.mfq = mfq
        self.bound = bound
        self.check_crc = check_crc
        self.on_arrival = on_arrival
        self.reput_from = 0
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
        self, put_cq: Callable[[DispatchRequest], object], *, notify: bool = True
    ) -> None:
        """Dispatch every whole record below the bound. ``put_cq`` awaits the CQ append."""
        bound = self.bound()
        while self.reput_from < bound:
            req, size = read_request(self.mfq, self.reput_from, check_crc=self.check_crc)
            if size == 0:
                mf = self.mfq.find(self.reput_from)
                if mf is None:
                    return
                self.reput_from = mf.file_from_offset + mf.size
                continue
            if req is None:
                # An HA slave receives records cut at frame boundaries: a partial tail is
                # not an error, the rest arrives with the next frame.
                if not self._partial_tail(bound):
                    log.error("reput found an invalid record", offset=self.reput_from)
                return
            result = put_cq(req)
            if asyncio.iscoroutine(result):
                await result
            for d in self.dispatchers:
                d.dispatch(req)
            self.reput_from += size
            if notify:
                self.on_arrival(req.topic, req.queue_id, req.consume_queue_offset)

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

    def start(self, put_cq: Callable[[DispatchRequest], object]) -> None:
        """Start the background task."""
        self._task = asyncio.get_running_loop().create_task(self._run(put_cq), name="store/reput")

    async def _run(self, put_cq: Callable[[DispatchRequest], object]) -> None:
        while not self._stop.is_set():
            await self._wake.wait()
            self._wake.clear()
            await self.dispatch_available(put_cq)

    async def stop(self, put_cq: Callable[[DispatchRequest], object]) -> None:
        """Stop the task after a last dispatch pass. Idempotent."""
        self._stop.set()
        self._wake.set()
        if self._task is not None:
            task, self._task = self._task, None
            await task
        await self.dispatch_available(put_cq)
