"""One (topic, queueId) consume queue of 20-byte units (store.md section 4).

Owns: ``consumequeue/<topic>/<queueId>/<20-digit>`` segments, appending units (duplicate skip,
``fillPreBlank``), reading units, recovery (walk to the first invalid unit) and truncation by
commit-log offset. Segment creation, recovery and truncation block: run them on an executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from concurrent.futures import Executor
from pathlib import Path
from typing import Final

import structlog

from rocketpy.store.consume_queue.unit import (
    BLANK_UNIT,
    BLANK_UNIT_SIZE,
    UNIT,
    UNIT_SIZE,
    CqUnit,
    decode_unit,
    encode_unit,
    units_struct,
)
from rocketpy.store.mapped_file import RESERVE_CHUNK, MappedFile
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)

_UNIT_PACK: Final = UNIT.pack_into
#: :meth:`ConsumeQueue.put_nowait` reserves a segment's next chunk of disk blocks once less than
#: this much of its reserved room is left after a write (a 1 MiB chunk holds 52,428 units).
RESERVE_AHEAD: Final = RESERVE_CHUNK // 2


def _unit(mf: MappedFile, pos: int) -> tuple[int, int, int]:
    """(commit-log offset, size, tags code) at ``pos`` of ``mf``, read in place."""
    unit: tuple[int, int, int] = UNIT.unpack_from(mf.buffer, pos)
    return unit


def _valid_units(mf: MappedFile) -> int:
    """How many units at the head of ``mf`` are valid (``offset >= 0 and size > 0``): the
    first invalid one found by bisection (valid units, then zeros; see ``recover``)."""
    lo, hi = 0, mf.size // UNIT_SIZE  # units [0, lo) valid; [hi, ...) invalid
    while lo < hi:
        mid = (lo + hi) // 2
        offset, size, _ = _unit(mf, mid * UNIT_SIZE)
        if offset >= 0 and size > 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


class ConsumeQueue:
    """Units of one queue; queue offset ``n`` lives at logical byte ``n * 20``."""

    def __init__(
        self, root: Path, topic: str, queue_id: int, file_size: int, alloc: Executor | None = None
    ) -> None:
        """``alloc``: the allocation thread :meth:`put_nowait` reserves disk blocks ahead on
        (None: only :meth:`put` reserves them, when it must)."""
        self.topic = topic
        self.queue_id = queue_id
        # Segment size must hold whole units (upstream rounds it the same way).
        self.file_size = file_size - file_size % UNIT_SIZE
        self.mfq = MappedFileQueue(root / topic / str(queue_id), self.file_size)
        self.min_logic_offset = 0
        self.max_physic_offset = 0
        #: Set (on the loop) when the topic is deleted; no segment is made after that.
        self.deleted = False
        self._alloc = alloc
        self._ahead: asyncio.Future[None] | None = None
        #: The segment whose work ahead failed (not tried again for it).
        self._ahead_failed: MappedFile | None = None
        #: The segment after the last one, made ahead (set on the allocation thread).
        self._spare: MappedFile | None = None

    @property
    def max_offset(self) -> int:
        """Number of units = next queue offset."""
        return self.mfq.max_offset // UNIT_SIZE

    @property
    def min_offset(self) -> int:
        """``minLogicOffset / 20``."""
        return max(self.min_logic_offset, self.mfq.min_offset) // UNIT_SIZE

    def recover(self) -> None:
        """Load segments and set the write position after the last valid unit. Blocks.

        As upstream, the last three segments are checked, up to the first unit that is not
        ``offset >= 0 and size > 0``; but by bisection, not unit by unit: units are appended in
        order into zero-filled segments and every truncation zeroes what it cut (see
        :meth:`truncate_by_commit_log`), so a segment is valid units followed by zeros, and
        a queue rolls to a new segment only when the last one is full. A few pages are read
        per queue whatever its length.
        """
        self.mfq.load()
        files = self.mfq.files
        if not files:
            return
        checked = files[max(0, len(files) - 3) :]
        head = _unit(checked[0], 0)
        if head[1] == BLANK_UNIT_SIZE and head[0] == 0:
            self.min_logic_offset = checked[0].file_from_offset + UNIT_SIZE
        end = checked[0].file_from_offset
        for mf in checked:
            count = _valid_units(mf)
            end = mf.file_from_offset + count * UNIT_SIZE
            if count * UNIT_SIZE < mf.size - mf.size % UNIT_SIZE:
                break
        self.mfq.truncate_dirty_files(end)
        last = self._unit_at(end - UNIT_SIZE) if end > self.mfq.min_offset else None
        if last is not None and last.valid and last.size != BLANK_UNIT_SIZE:
            self.max_physic_offset = last.commit_log_offset + last.size
        if self.mfq.files:
            self.mfq.files[-1].appending()  # appended to from here, as a new segment is

    def truncate_by_commit_log(self, phy_offset: int) -> None:
        """Drop units whose commit-log offset is >= ``phy_offset``, zeroing them in the segment
        that keeps its head (recovery relies on valid units being followed by zeros). Blocks."""
        end = self.mfq.max_offset
        new_end = end
        while new_end > self.mfq.min_offset:
            unit = self._unit_at(new_end - UNIT_SIZE)
            if unit is None or unit.commit_log_offset < phy_offset or unit.size == BLANK_UNIT.size:
                break
            new_end -= UNIT_SIZE
        if new_end != end:
            log.info("truncating consume queue", topic=self.topic, queue_id=self.queue_id,
                     from_offset=end // UNIT_SIZE, to_offset=new_end // UNIT_SIZE)  # fmt: skip
            kept = self.mfq.find(new_end)
            if kept is not None:
                pos = new_end - kept.file_from_offset
                kept.zero(pos, min(end - kept.file_from_offset, kept.size))
            self.mfq.truncate_dirty_files(new_end)
            last = self._unit_at(new_end - UNIT_SIZE) if new_end > 0 else None
            self.max_physic_offset = last.commit_log_offset + last.size if last else 0

    def _unit_at(self, logical: int) -> CqUnit | None:
        raw = self.mfq.read(logical, UNIT_SIZE)
        return decode_unit(raw) if raw is not None else None

    def get_unit(self, queue_offset: int) -> CqUnit | None:
        """The unit at ``queue_offset``, or None when not written (or its file is gone)."""
        return self._unit_at(queue_offset * UNIT_SIZE)

    def put_nowait(
        self, commit_log_offset: int, size: int, tags_code: int, queue_offset: int
    ) -> bool:
        """The common case of :meth:`put` without a coroutine: the unit lands right after the
        last one in a segment with room. False when :meth:`put` must handle it (a duplicate, a
        gap, a new segment)."""
        files = self.mfq.files  # once per record: no property calls, no temporary bytes
        if not files:
            return False
        last = files[-1]
        pos = last.wrote_position
        if (
            pos + UNIT_SIZE > last.allocated  # also past the segment: allocated <= size
            or commit_log_offset + size <= self.max_physic_offset
            or last.file_from_offset + pos != queue_offset * UNIT_SIZE
        ):
            return False
        _UNIT_PACK(last.buffer, pos, commit_log_offset, size, tags_code)
        last.wrote_position = pos = pos + UNIT_SIZE
        self.max_physic_offset = commit_log_offset + size
        if last.allocated - pos < RESERVE_AHEAD:
            self._reserve_ahead(last)
        return True

    def put_run_nowait(self, units: list[int], queue_offset: int) -> bool:
        """:meth:`put_nowait` for consecutive units (``units`` flattened: commit-log offset,
        size, tags code of each, at most ``MAX_UNITS_PER_PACK``) at consecutive queue offsets
        from ``queue_offset``, with one ``pack_into``: all of them, or (False) none."""
        files = self.mfq.files
        if not files:
            return False
        count = len(units) // 3
        last = files[-1]
        pos = last.wrote_position
        if (
            pos + UNIT_SIZE * count > last.allocated
            or units[0] + units[1] <= self.max_physic_offset
            or last.file_from_offset + pos != queue_offset * UNIT_SIZE
        ):
            return False
        units_struct(count).pack_into(last.buffer, pos, *units)
        last.wrote_position = pos = pos + UNIT_SIZE * count
        self.max_physic_offset = units[-3] + units[-2]
        if last.allocated - pos < RESERVE_AHEAD:
            self._reserve_ahead(last)
        return True

    def _reserve_ahead(self, mf: MappedFile) -> None:
        """Prepare on the allocation thread, while room is left, what the next writes need:
        ``mf``'s next chunk of disk blocks, or once it has them all the segment after it
        (:meth:`_prepare`). A reput that reaches the end of the reserved room, or of the
        segment, waits for that thread (behind a segment preallocation, and for the loop's
        GIL): dispatch stood still for a hundred milliseconds at a time while the queues of
        a busy topic filled together, then held the loop catching up. Best effort:
        :meth:`put` still makes what is missing when it gets there."""
        if self._ahead is not None or self._alloc is None or mf is self._ahead_failed:
            return
        if mf.allocated >= mf.size and self._spare is not None:
            return
        try:
            ahead = asyncio.get_running_loop().run_in_executor(self._alloc, self._prepare, mf)
        except RuntimeError:  # the allocation thread has shut down (the store stops)
            return
        self._ahead = ahead
        ahead.add_done_callback(functools.partial(self._prepared, mf))

    def _prepare(self, mf: MappedFile) -> None:
        """On the allocation thread: ``mf``'s next chunk of blocks, else the segment after it
        with its first chunk (kept as :attr:`_spare` until the roll; recovery drops it if a
        crash leaves it behind a segment that is not full)."""
        if mf.allocated < mf.size:
            mf.reserve(mf.allocated + RESERVE_CHUNK)
            return
        if self._spare is not None:
            return
        self._spare = self._create_segment(mf.file_from_offset + self.file_size)

    def _prepared(self, mf: MappedFile, ahead: asyncio.Future[None]) -> None:
        self._ahead = None
        error = None if ahead.cancelled() else ahead.exception()
        if error is not None:
            # Not again for this segment (a full disk would fail, and warn, at every unit
            # written until the room runs out): put() reserves, and retries, from there.
            self._ahead_failed = mf
            log.warning("consume queue blocks not reserved ahead", topic=self.topic,
                        queue_id=self.queue_id, error=str(error))  # fmt: skip

    async def _take_spare(self, start: int, alloc: Executor) -> MappedFile | None:
        """The segment made ahead if it starts at ``start`` (a truncation may have moved the
        end meanwhile: then it is deleted, before any segment is made where it lies)."""
        ahead = self._ahead
        if ahead is not None:  # it may be making the spare right now
            with contextlib.suppress(Exception):
                await ahead
        spare, self._spare = self._spare, None
        if spare is None or spare.file_from_offset == start:
            return spare
        await asyncio.get_running_loop().run_in_executor(alloc, spare.destroy)
        return None

    async def put(self, unit: CqUnit, queue_offset: int, alloc: Executor) -> bool:
        """Append ``unit`` at ``queue_offset``; False when skipped as a duplicate or when the
        queue's topic was deleted (a dispatch still holding the queue: its files are closed)."""
        if self.deleted or unit.commit_log_offset + unit.size <= self.max_physic_offset:
            return False
        target = queue_offset * UNIT_SIZE
        current = self.mfq.max_offset
        if target < current:
            log.warning("consume queue offset behind", topic=self.topic, queue_id=self.queue_id,
                        expected=current // UNIT_SIZE, got=queue_offset)  # fmt: skip
            return False
        if not self.mfq.files:
            if not await self._first_segment(target, alloc):
                return False
        elif target > current:
            log.warning("consume queue gap", topic=self.topic, queue_id=self.queue_id,
                        expected=current // UNIT_SIZE, got=queue_offset)  # fmt: skip
        while True:
            last = self.mfq.last
            if last is None or last.is_full:
                if not await self._add_segment(self.mfq.next_file_offset(), alloc):
                    return False
                continue
            mf_end = last.file_from_offset + last.wrote_position
            if mf_end < target:
                gap = min(target - mf_end, last.remaining)
                if not await self._reserve(last, last.wrote_position + gap, alloc):
                    return False
                last.append(encode_unit(BLANK_UNIT) * (gap // UNIT_SIZE))
                continue
            if not await self._reserve(last, last.wrote_position + UNIT_SIZE, alloc):
                return False
            last.append(encode_unit(unit))
            self.max_physic_offset = unit.commit_log_offset + unit.size
            return True

    def flush(self) -> None:
        """msync every written unit. Blocks."""
        self.mfq.flush(self.mfq.max_offset)

    async def _first_segment(self, target: int, alloc: Executor) -> bool:
        """The queue's first segment, the one holding logical byte ``target``, with
        placeholders below it (``fillPreBlank``); False once the topic was deleted."""
        start = target - target % self.file_size
        if not await self._add_segment(start, alloc):
            return False
        if target > start:
            mf = self.mfq.files[0]
            if not await self._reserve(mf, target - start, alloc):
                return False
            mf.append(encode_unit(BLANK_UNIT) * ((target - start) // UNIT_SIZE))
            self.min_logic_offset = target
        return True

    async def _reserve(self, mf: MappedFile, end: int, alloc: Executor) -> bool:
        """Disk blocks for ``mf`` below ``end`` (its :meth:`~MappedFile.reserve`, on the
        allocation thread when it must allocate); False once the queue's topic was deleted
        meanwhile (its files are closed).

        Raises:
            OSError: no blocks (a full disk): nothing is written, the caller tries again later.
        """
        if end <= mf.allocated:
            return True
        await asyncio.get_running_loop().run_in_executor(alloc, mf.reserve, end)
        return not self.deleted

    async def _add_segment(self, start: int, alloc: Executor) -> bool:
        """Make the segment at ``start`` on the allocation thread and add it; False once the
        queue's topic was deleted, before or while the segment was made.

        ``deleteTopics`` sets :attr:`deleted` on the loop, then closes the queue and removes
        its directory on this same thread. A segment made before the flag was set is
        therefore made before that removal, which deletes its file; but this put resumes
        after the delete began, so the segment must not join the closed queue (a later put
        would append to a file nobody reads): it is unmapped here instead.
        """
        loop = asyncio.get_running_loop()
        made = await self._take_spare(start, alloc)
        if made is None:
            made = await loop.run_in_executor(alloc, self._create_segment, start)
        if made is not None and self.deleted:
            await loop.run_in_executor(alloc, made.close)
            return False
        if made is None:
            return False
        self.mfq.add(made)
        return True

    def _create_segment(self, start: int) -> MappedFile | None:
        """The next segment (on the allocation thread), or None once the queue's topic was
        deleted: a dispatch that fetched this queue before the delete must not make its
        directory again behind the delete's back (an orphan beside the queue a later dispatch
        makes for the same topic). The deletion runs on this thread too and is queued after
        the flag is set, so a segment made after it sees the flag."""
        if self.deleted:
            return None
        made = self.mfq.create_next(start)
        # Readahead off ahead of the writer: its first unit would otherwise make the kernel
        # zero-fill a readahead window of the new file on the loop (2-12 ms a segment here;
        # the first sends to a topic of 1,024 queues stalled every replica for seconds).
        made.appending()
        # Its first chunk of blocks in the same trip to this thread (the put reserves what
        # is missing, and reports a full disk).
        with contextlib.suppress(OSError):
            made.reserve(RESERVE_CHUNK)
        return made

    def close(self) -> None:
        """Unmap; the segment made ahead, unused, is deleted. Blocks."""
        self.mfq.close()
        spare, self._spare = self._spare, None
        if spare is not None:
            spare.destroy()
