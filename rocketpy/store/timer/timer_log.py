"""TimerLog: the timer store's append-only log of 52-byte units (``storePathRootDir/timerlog``).

Owns: appending units (a segment that cannot take another unit is closed with a blank record,
as upstream), reading a unit by position, the start-up scan that finds the log's end and
revises the wheel from the units after the last flushed position (``recoverAndRevise``), and
flushing. Layouts in :mod:`rocketpy.store.timer.record`. Mirrors ``store/timer/TimerLog`` and
``TimerMessageStore.recoverAndRevise``. Must not: decide timing (the timer message store does).
Blocking calls (``load``, ``recover``, ``create_next``, ``flush``, ``close``) run on an executor;
appends into a mapped segment and reads run on the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import structlog

from rocketpy.store.mapped_file import MappedFile
from rocketpy.store.mapped_file_queue import MappedFileQueue
from rocketpy.store.timer.record import (
    BLANK_MAGIC_CODE,
    MIN_BLANK_LEN,
    UNIT,
    UNIT_SIZE,
    TimerLogUnit,
    decode_unit,
    encode_blank,
    is_magic_ok,
    offset_for_last_unit,
)

log = structlog.get_logger(__name__)

#: Called by the recovery scan for each valid unit: (delayed time ms, unit position).
ReviseSlot = Callable[[int, int], None]


class TimerLog:
    """Segments of ``file_size`` bytes under ``directory``."""

    def __init__(self, directory: Path, file_size: int) -> None:
        """Args: ``directory`` the ``timerlog`` folder; ``file_size``
        ``mappedFileSizeTimerLog``."""
        # Blocks up front (allocate_blocks): a hole on a full disk is SIGBUS when written.
        self.queue = MappedFileQueue(directory, file_size, allocate=True)
        self.file_size = file_size
        self.flushed_where = 0

    def load(self) -> None:
        """Map every segment (each marked fully written until :meth:`recover`). Blocks."""
        self.queue.load()

    def recover(self, begin: int, revise: ReviseSlot) -> int:
        """``recoverAndRevise(begin, true)``: scan units from the segment holding ``begin``,
        revising the wheel for each valid one, up to the first unit that is not (a zeroed or
        torn tail) or a blank record; cut the log there. Blocks.

        Returns:
            The log's end (the process offset).
        """
        files = self.queue.files
        if not files:
            return 0
        index = len(files) - 1
        while index > 0 and begin < files[index].file_from_offset:
            index -= 1
        check = files[index].file_from_offset
        for mf in files[index:]:
            position, stop = _scan_segment(mf, revise)
            check = mf.file_from_offset + position
            if stop:
                break
        self.queue.truncate_dirty_files(check)
        self.flushed_where = check
        log.info("timer log recovered", begin=begin, end=check)
        return check

    def needs_segment(self) -> bool:
        """Whether the next append needs a new segment first (call :meth:`create_next`)."""
        last = self.queue.last
        return last is None or last.remaining < UNIT_SIZE + MIN_BLANK_LEN

    def create_next(self) -> MappedFile:
        """Close the last segment with a blank record and create the next one. Blocks only in
        the file creation; the caller adds the result with :meth:`add` on the loop."""
        return self.queue.create_next(self.queue.next_file_offset())

    def add(self, mf: MappedFile) -> None:
        """Adopt a segment made by :meth:`create_next`, ending the previous one with a blank."""
        last = self.queue.last
        if last is not None and not last.is_full:
            remaining = last.remaining
            last.append(encode_blank(remaining)[: min(MIN_BLANK_LEN, remaining)])
            last.wrote_position = last.size
        self.queue.add(mf)

    def append(self, unit: TimerLogUnit) -> int:
        """Append ``unit``; returns its position. Call :meth:`needs_segment` first.

        Raises:
            ValueError: no room (the caller skipped :meth:`needs_segment`).
        """
        last = self.queue.last
        if last is None or last.remaining < UNIT_SIZE + MIN_BLANK_LEN:
            raise ValueError("timer log needs a new segment")
        pos = last.wrote_position
        UNIT.pack_into(
            last.buffer,
            pos,
            unit.size,
            unit.prev_pos,
            unit.magic,
            unit.write_time_ms,
            unit.delay_ms,
            unit.offset_py,
            unit.size_py,
            unit.topic_hash,
            unit.reserved,
        )
        last.wrote_position = pos + UNIT_SIZE
        return last.file_from_offset + pos

    def expired_segments(self, min_phy_offset: int) -> list[MappedFile]:
        """``deleteExpiredFileByOffsetForTimerLog``: take off the oldest segments (never the
        last) whose last unit names a commit-log record below ``min_phy_offset`` -- retention
        deleted their messages, and units are appended in commit-log order. The caller destroys
        them off the loop."""
        expired: list[MappedFile] = []
        files = self.queue.files
        last_unit = offset_for_last_unit(self.file_size)
        while len(files) > 1:
            mf = files[0]
            size, _prev, magic, _w, _d, offset_py = UNIT.unpack_from(mf.buffer, last_unit)[:6]
            if size != UNIT_SIZE or not is_magic_ok(magic) or offset_py >= min_phy_offset:
                break
            expired.append(files.pop(0))
        return expired

    def read_unit(self, position: int) -> TimerLogUnit | None:
        """The unit at ``position``, or None when no written segment holds it."""
        raw = self.queue.read(position, UNIT_SIZE)
        return None if raw is None else decode_unit(raw)

    @property
    def max_offset(self) -> int:
        """The end of the written log."""
        return self.queue.max_offset

    def flush(self) -> int:
        """Make the written units durable; returns (and records) the flushed end. Blocks."""
        end = self.queue.max_offset
        if end > self.flushed_where:
            self.queue.flush(end)
            self.flushed_where = end
        return self.flushed_where

    def close(self) -> None:
        """Unmap the segments. Blocks."""
        self.queue.close()


def _scan_segment(mf: MappedFile, revise: ReviseSlot) -> tuple[int, bool]:
    """(position after the last valid unit, whether the scan must stop at this segment)."""
    buf = mf.buffer
    position = 0
    limit = mf.size - UNIT_SIZE
    while position <= limit:
        size, _prev, magic, write, delay = UNIT.unpack_from(buf, position)[:5]
        if magic == BLANK_MAGIC_CODE:
            return position, False
        if size != UNIT_SIZE or not is_magic_ok(magic):
            return position, True
        revise(write + delay, mf.file_from_offset + position)
        position += UNIT_SIZE
    return position, False
