"""One (topic, queueId) consume queue of 20-byte units (store.md section 4).

Owns: ``consumequeue/<topic>/<queueId>/<20-digit>`` segments, appending units (duplicate skip,
``fillPreBlank``), reading units, recovery (walk to the first invalid unit) and truncation by
commit-log offset. Segment creation, recovery and truncation block: run them on an executor.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from pathlib import Path
from typing import Final

import structlog

from rocketpy.store.consume_queue.unit import (
    BLANK_UNIT,
    UNIT,
    UNIT_SIZE,
    CqUnit,
    decode_unit,
    encode_unit,
    units_struct,
)
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)

_UNIT_PACK: Final = UNIT.pack_into


class ConsumeQueue:
    """Units of one queue; queue offset ``n`` lives at logical byte ``n * 20``."""

    def __init__(self, root: Path, topic: str, queue_id: int, file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        # Segment size must hold whole units (upstream rounds it the same way).
        self.file_size = file_size - file_size % UNIT_SIZE
        self.mfq = MappedFileQueue(root / topic / str(queue_id), self.file_size)
        self.min_logic_offset = 0
        self.max_physic_offset = 0

    @property
    def max_offset(self) -> int:
        """Number of units = next queue offset."""
        return self.mfq.max_offset // UNIT_SIZE

    @property
    def min_offset(self) -> int:
        """``minLogicOffset / 20``."""
        return max(self.min_logic_offset, self.mfq.min_offset) // UNIT_SIZE

    def recover(self) -> None:
        """Load segments and set the write position after the last valid unit. Blocks."""
        self.mfq.load()
        files = self.mfq.files
        if not files:
            return
        end = files[0].file_from_offset
        first_unit = True
        for mf in files[max(0, len(files) - 3) :]:
            end = mf.file_from_offset
            pos = 0
            while pos + UNIT_SIZE <= mf.size:
                unit = decode_unit(mf.read(pos, UNIT_SIZE))
                if not unit.valid:
                    break
                if unit.size != BLANK_UNIT.size or unit.commit_log_offset != 0:
                    self.max_physic_offset = unit.commit_log_offset + unit.size
                elif first_unit:
                    self.min_logic_offset = mf.file_from_offset + pos + UNIT_SIZE
                first_unit = False
                pos += UNIT_SIZE
            end = mf.file_from_offset + pos
            if pos < mf.size:
                break
        self.mfq.truncate_dirty_files(end)

    def truncate_by_commit_log(self, phy_offset: int) -> None:
        """Drop units whose commit-log offset is >= ``phy_offset``. Blocks."""
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
            pos + UNIT_SIZE > last.size
            or commit_log_offset + size <= self.max_physic_offset
            or last.file_from_offset + pos != queue_offset * UNIT_SIZE
        ):
            return False
        _UNIT_PACK(last.buffer, pos, commit_log_offset, size, tags_code)
        last.wrote_position = pos + UNIT_SIZE
        self.max_physic_offset = commit_log_offset + size
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
            pos + UNIT_SIZE * count > last.size
            or units[0] + units[1] <= self.max_physic_offset
            or last.file_from_offset + pos != queue_offset * UNIT_SIZE
        ):
            return False
        units_struct(count).pack_into(last.buffer, pos, *units)
        last.wrote_position = pos + UNIT_SIZE * count
        self.max_physic_offset = units[-3] + units[-2]
        return True

    async def put(self, unit: CqUnit, queue_offset: int, alloc: Executor) -> bool:
        """Append ``unit`` at ``queue_offset``; False when skipped as a duplicate."""
        if unit.commit_log_offset + unit.size <= self.max_physic_offset:
            return False
        target = queue_offset * UNIT_SIZE
        current = self.mfq.max_offset
        if target < current:
            log.warning("consume queue offset behind", topic=self.topic, queue_id=self.queue_id,
                        expected=current // UNIT_SIZE, got=queue_offset)  # fmt: skip
            return False
        loop = asyncio.get_running_loop()
        if not self.mfq.files:
            start = target - target % self.file_size
            self.mfq.add(await loop.run_in_executor(alloc, self.mfq.create_next, start))
            if target > start:
                # fillPreBlank: placeholders for offsets below the first real unit.
                mf = self.mfq.files[0]
                mf.append(encode_unit(BLANK_UNIT) * ((target - start) // UNIT_SIZE))
                self.min_logic_offset = target
        elif target > current:
            log.warning("consume queue gap", topic=self.topic, queue_id=self.queue_id,
                        expected=current // UNIT_SIZE, got=queue_offset)  # fmt: skip
        while True:
            last = self.mfq.last
            if last is None or last.is_full:
                start = self.mfq.next_file_offset()
                self.mfq.add(await loop.run_in_executor(alloc, self.mfq.create_next, start))
                continue
            mf_end = last.file_from_offset + last.wrote_position
            if mf_end < target:
                gap = min(target - mf_end, last.remaining)
                last.append(encode_unit(BLANK_UNIT) * (gap // UNIT_SIZE))
                continue
            last.append(encode_unit(unit))
            self.max_physic_offset = unit.commit_log_offset + unit.size
            return True

    def flush(self) -> None:
        """msync every written unit. Blocks."""
        self.mfq.flush(self.mfq.max_offset)

    def close(self) -> None:
        """Unmap. Blocks."""
        self.mfq.close()
