"""TimerWheel: ``slotsTotal * 2`` slots of 32 bytes mapped from ``storePathRootDir/timerwheel``.

Owns: slot reads and writes by time (a slot whose stored time is not the asked time is empty:
the wheel wraps), the recovery revision of a slot's chain end, the scan for slots pointing past
the timer log's end (``checkPhyPos``) and the count of pending messages. Mirrors
``store/timer/TimerWheel``; layout in :mod:`rocketpy.store.timer.record`. Must not: know about
messages. ``open``, ``flush``, ``check_phy_pos`` and ``close`` block (executor); slot reads and
writes are copies into the mapping (loop). Upstream writes slots into a heap copy and diffs it
into the mapping on flush; here slots are written into the mapping and ``flush`` msyncs it
(the same bytes reach the file; a torn slot after a machine crash is revised by recovery).
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from rocketpy.store.mapped_file import allocate_blocks
from rocketpy.store.timer.record import (
    EMPTY_SLOT,
    NO_POS,
    SLOT,
    SLOT_SIZE,
    SLOTS_TOTAL,
    Slot,
    slot_index,
)

IGNORE = -2


class TimerWheel:
    """The mapped wheel file."""

    def __init__(self, path: Path, precision_ms: int, slots_total: int = SLOTS_TOTAL) -> None:
        """Args: ``path`` the ``timerwheel`` file; ``precision_ms`` ``timerPrecisionMs``;
        ``slots_total`` upstream's fixed 7 days of seconds."""
        self.path = path
        self.precision_ms = precision_ms
        self.slots_total = slots_total
        self.length = slots_total * 2 * SLOT_SIZE
        self._map: mmap.mmap | None = None

    def open(self) -> None:
        """Create (sparse) or map the wheel. Blocks.

        Raises:
            ValueError: an existing wheel of another length (upstream refuses to start).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size not in (0, self.length):
                raise ValueError(f"Timer wheel length:{size} != expected:{self.length}")
            if size == 0:
                os.ftruncate(fd, self.length)
                allocate_blocks(fd, self.length)  # slots are written anywhere, any time
            self._map = mmap.mmap(fd, self.length, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)

    @property
    def _buf(self) -> mmap.mmap:
        if self._map is None:
            raise ValueError("timer wheel is closed")
        return self._map

    def _pos(self, time_ms: int) -> int:
        return slot_index(time_ms, self.precision_ms, self.slots_total) * SLOT_SIZE

    def get_slot(self, time_ms: int) -> Slot:
        """``getSlot``: the slot of ``time_ms``, or the empty slot if it holds another time."""
        units, first, last, num, magic = SLOT.unpack_from(self._buf, self._pos(time_ms))
        if units != time_ms // self.precision_ms:
            return EMPTY_SLOT
        return Slot(
            time_ms=units * self.precision_ms, first_pos=first, last_pos=last, num=num, magic=magic
        )

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int, magic: int) -> None:
        """``putSlot``: the whole slot of ``time_ms``."""
        SLOT.pack_into(
            self._buf, self._pos(time_ms), time_ms // self.precision_ms, first_pos, last_pos, num,
            magic,
        )  # fmt: skip

    def revise_slot(self, time_ms: int, first_pos: int, last_pos: int, *, force: bool) -> None:
        """``reviseSlot``: set the chain ends of ``time_ms``'s slot (``IGNORE`` keeps one); a
        slot holding another time is replaced only with ``force``."""
        buf, pos = self._buf, self._pos(time_ms)
        units, first, last, num, magic = SLOT.unpack_from(buf, pos)
        if units != time_ms // self.precision_ms:
            if force:
                start = first_pos if first_pos != IGNORE else last_pos
                SLOT.pack_into(buf, pos, time_ms // self.precision_ms, start, last_pos, 0, 0)
            return
        SLOT.pack_into(
            buf, pos, units, first if first_pos == IGNORE else first_pos,
            last if last_pos == IGNORE else last_pos, num, magic,
        )  # fmt: skip

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> int:
        """``checkPhyPos``: the smallest first position of a live slot whose chain ends past
        ``max_offset`` (a damaged timer log), or a huge number if none. Blocks (scans the
        whole wheel)."""
        precision = self.precision_ms
        start_units = time_start_ms // precision
        total = self.slots_total * 2
        first_index = start_units % total
        min_first = 1 << 63
        for index, (units, first, last, _num, _magic) in enumerate(SLOT.iter_unpack(self._buf)):
            if last <= max_offset or first == NO_POS:
                continue
            if units != start_units + (index - first_index) % total:
                continue
            min_first = min(min_first, first)
        # The scan mapped every page of the wheel (37 MB at the default size) into this
        # process; drop them from its RSS (a shared file mapping keeps its data: the pages stay
        # in the page cache and fault back in when a slot is read or written).
        self._buf.madvise(mmap.MADV_DONTNEED)
        return min_first

    def all_num(self, time_start_ms: int, slots: int | None = None) -> int:
        """``getAllNum``: pending messages in the live slots from ``time_start_ms`` on (the next
        ``slots`` of them, the whole wheel by default)."""
        total = self.slots_total * 2
        count = 0
        start_units = time_start_ms // self.precision_ms
        for i in range(total if slots is None else min(slots, total)):
            time_ms = (start_units + i) * self.precision_ms
            slot = self.get_slot(time_ms)
            count += slot.num if slot.time_ms != -1 else 0
        return count

    def flush(self) -> None:
        """msync the wheel. Blocks."""
        if self._map is not None:
            self._map.flush()

    def close(self) -> None:
        """Flush and unmap; idempotent. Blocks."""
        mapping, self._map = self._map, None
        if mapping is not None:
            mapping.flush()
            mapping.close()
