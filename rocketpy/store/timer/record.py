"""Byte layouts and arithmetic of the timer store's files (pure).

Owns: the 52-byte timer-log unit, the 16-byte blank record at a timer-log segment's end, the
32-byte timer-wheel slot, the 56-byte ``timercheck`` checkpoint, the unit magic bits and the
wheel's slot arithmetic (``getSlotIndex``, the roll decision of ``doEnqueue``). Mirrors
``TimerLog``, ``Slot``/``TimerWheel``, ``TimerCheckpoint`` and constants of
``TimerMessageStore`` (apache/rocketmq 5.3, ``store/timer``). Must not: touch files, clocks or
the event loop. All integers are big-endian, as Java's ``ByteBuffer``.

Timer-log unit (``TimerLog.UNIT_SIZE`` = 52):

| offset | size | field | upstream |
| --- | --- | --- | --- |
| 0 | 4 | unit size (52) | size |
| 4 | 8 | timer-log position of the previous unit of the same slot, -1 for none | prev pos |
| 12 | 4 | magic: 1 default, \\|2 roll, \\|4 delete | magic |
| 16 | 8 | write time (wheel time when enqueued, ms) | currWriteTime |
| 24 | 4 | delayed time - write time (ms) | delayTime |
| 28 | 8 | commit-log offset of the timer-topic record | offsetPy |
| 36 | 4 | its size | sizePy |
| 40 | 4 | Java ``String.hashCode`` of the real topic | hash code of real topic |
| 44 | 8 | reserved, 0 | reserved |

Blank record (``MIN_BLANK_LEN`` = 16, ends a segment that cannot take another unit): size
(remaining bytes of the segment, 4), 0 (8), ``BLANK_MAGIC_CODE`` (4).

Timer-wheel slot (``Slot.SIZE`` = 32; the wheel is ``slotsTotal * 2`` slots):

| offset | size | field |
| --- | --- | --- |
| 0 | 8 | slot time / precisionMs |
| 8 | 8 | timer-log position of the chain's first unit (-1 none) |
| 16 | 8 | timer-log position of the chain's last unit (-1 none) |
| 24 | 4 | number of pending messages |
| 28 | 4 | magic (unused, 0) |

``timercheck`` (``TimerCheckpoint``; a 4096-byte page, these 56 bytes at its start, and the
GET_TIMER_CHECK_POINT body): lastReadTimeMs, lastTimerLogFlushPos, lastTimerQueueOffset,
masterTimerQueueOffset, dataVersion.stateVersion, dataVersion.timestamp, dataVersion.counter
(seven 8-byte longs).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from rocketpy.common.errors import CodecError

UNIT: Final = struct.Struct(">iqiqiqiiq")
UNIT_SIZE: Final = UNIT.size  # 52
#: Where offsetPy starts in a unit (``UNIT_PRE_SIZE_FOR_MSG``).
UNIT_PRE_SIZE_FOR_MSG: Final = 28
BLANK: Final = struct.Struct(">iqi")
MIN_BLANK_LEN: Final = BLANK.size  # 16
#: ``0xBBCCDDEE ^ 1880681586 + 8`` in Java int arithmetic (``+`` binds first).
BLANK_MAGIC_CODE: Final = struct.unpack(">i", struct.pack(">I", 0xBBCCDDEE ^ (1880681586 + 8)))[0]

SLOT: Final = struct.Struct(">qqqii")
SLOT_SIZE: Final = SLOT.size  # 32

CHECKPOINT: Final = struct.Struct(">qqqqqqq")
CHECKPOINT_SIZE: Final = CHECKPOINT.size  # 56
CHECKPOINT_FILE_SIZE: Final = 4096

MAGIC_DEFAULT: Final = 1
MAGIC_ROLL: Final = 1 << 1
MAGIC_DELETE: Final = 1 << 2

#: Days the wheel spans at 1000 ms precision (``TIMER_WHEEL_TTL_DAY``); its slot count is fixed.
TIMER_WHEEL_TTL_DAY: Final = 7
DAY_SECS: Final = 24 * 3600
SLOTS_TOTAL: Final = TIMER_WHEEL_TTL_DAY * DAY_SECS
TIMER_BLANK_SLOTS: Final = 60
#: ``timerPrecisionMs`` is rounded down to one of these (``setTimerPrecisionMs``).
PRECISION_CANDIDATES: Final = (100, 200, 500, 1000)
NO_POS: Final = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class TimerLogUnit:
    """One timer-log unit: a message ``offset_py``/``size_py`` due at ``delayed_time_ms``."""

    prev_pos: int
    magic: int
    write_time_ms: int
    delay_ms: int
    offset_py: int
    size_py: int
    topic_hash: int
    size: int = UNIT_SIZE
    reserved: int = 0

    @property
    def delayed_time_ms(self) -> int:
        """When the unit's slot is due (``enqueueTime + delayTime``)."""
        return self.write_time_ms + self.delay_ms

    @property
    def is_roll(self) -> bool:
        """``needRoll``: the message goes back into the timer topic, not to its real topic."""
        return self.magic & MAGIC_ROLL != 0

    @property
    def is_delete(self) -> bool:
        """``needDelete``: the message cancels another (``TIMER_DEL_UNIQKEY``)."""
        return self.magic & MAGIC_DELETE != 0


def encode_unit(unit: TimerLogUnit) -> bytes:
    """The 52 bytes of ``unit``."""
    return UNIT.pack(
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


def decode_unit(buf: bytes | memoryview, pos: int = 0) -> TimerLogUnit:
    """The unit at ``pos`` of ``buf``.

    Raises:
        CodecError: fewer than 52 bytes there.
    """
    if len(buf) - pos < UNIT_SIZE:
        raise CodecError(f"timer log unit at {pos}: {len(buf) - pos} bytes, need {UNIT_SIZE}")
    size, prev, magic, write, delay, offset_py, size_py, topic_hash, reserved = UNIT.unpack_from(
        buf, pos
    )
    return TimerLogUnit(
        size=size,
        prev_pos=prev,
        magic=magic,
        write_time_ms=write,
        delay_ms=delay,
        offset_py=offset_py,
        size_py=size_py,
        topic_hash=topic_hash,
        reserved=reserved,
    )


def encode_blank(remaining: int) -> bytes:
    """The blank record that fills the last ``remaining`` bytes of a segment."""
    return BLANK.pack(remaining, 0, BLANK_MAGIC_CODE)


def is_magic_ok(magic: int) -> bool:
    """``isMagicOK``: only the low four bits may be set."""
    return (magic | 0xF) == 0xF


def offset_for_last_unit(file_size: int) -> int:
    """``getOffsetForLastUnit``: where a segment's last full unit starts."""
    return file_size - (file_size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE


@dataclass(frozen=True, slots=True, kw_only=True)
class Slot:
    """One wheel slot; ``time_ms == -1`` is upstream's empty slot ``new Slot(-1, -1, -1)``."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0


EMPTY_SLOT: Final = Slot(time_ms=-1, first_pos=NO_POS, last_pos=NO_POS)


def encode_slot(slot: Slot, precision_ms: int) -> bytes:
    """A slot's 32 bytes (its time stored in precision units, as upstream)."""
    return SLOT.pack(
        slot.time_ms // precision_ms, slot.first_pos, slot.last_pos, slot.num, slot.magic
    )


def decode_slot(buf: bytes | memoryview, pos: int, precision_ms: int) -> Slot:
    """The raw slot at ``pos`` (``getRawSlot``)."""
    units, first, last, num, magic = SLOT.unpack_from(buf, pos)
    return Slot(time_ms=units * precision_ms, first_pos=first, last_pos=last, num=num, magic=magic)


def slot_index(time_ms: int, precision_ms: int, slots_total: int = SLOTS_TOTAL) -> int:
    """``getSlotIndex``: where ``time_ms``'s slot lives in the wheel of ``slots_total * 2``."""
    return time_ms // precision_ms % (slots_total * 2)


def format_time_ms(time_ms: int, precision_ms: int) -> int:
    """``formatTimeMs``: ``time_ms`` rounded down to the precision."""
    return time_ms // precision_ms * precision_ms


def effective_precision_ms(configured: int) -> int:
    """``setTimerPrecisionMs``: the largest candidate not above ``configured`` (100 at least)."""
    chosen = PRECISION_CANDIDATES[0]
    for candidate in PRECISION_CANDIDATES:
        if configured >= candidate:
            chosen = candidate
    return chosen


def roll_window_slots(configured: int, slots_total: int = SLOTS_TOTAL) -> int:
    """``timerRollWindowSlots``: the configured window, or the wheel minus its blank slots when
    that is out of range."""
    if configured > slots_total - TIMER_BLANK_SLOTS or configured < 2:
        return slots_total - TIMER_BLANK_SLOTS
    return configured


def roll_target(
    delayed_ms: int, write_time_ms: int, window_slots: int, precision_ms: int
) -> int | None:
    """``doEnqueue``'s roll rule: None when ``delayed_ms`` fits the window ahead of the write
    time, else the (earlier) time at which the message is put back into the timer topic."""
    window_ms = window_slots * precision_ms
    if delayed_ms - write_time_ms < window_ms:
        return None
    if delayed_ms - write_time_ms - window_ms < window_slots // 3 * precision_ms:
        return write_time_ms + window_slots // 2 * precision_ms  # enough time for the next roll
    return write_time_ms + window_ms


def java_string_hash(text: str | None) -> int:
    """Java's ``String.hashCode`` (0 for None, as ``hashTopicForMetrics``)."""
    if text is None:
        return 0
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@dataclass(frozen=True, slots=True, kw_only=True)
class TimerCheckpointData:
    """The values of ``timercheck``."""

    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0


def encode_checkpoint(cp: TimerCheckpointData) -> bytes:
    """``TimerCheckpoint.encode``: 56 bytes."""
    return CHECKPOINT.pack(
        cp.last_read_time_ms,
        cp.last_timer_log_flush_pos,
        cp.last_timer_queue_offset,
        cp.master_timer_queue_offset,
        cp.state_version,
        cp.timestamp,
        cp.counter,
    )


def decode_checkpoint(buf: bytes | memoryview) -> TimerCheckpointData:
    """``TimerCheckpoint.decode``; the DataVersion part is optional (older files).

    Raises:
        CodecError: fewer than 32 bytes.
    """
    if len(buf) < 32:
        raise CodecError(f"timer checkpoint: {len(buf)} bytes, need at least 32")
    read, flush, queue, master = struct.unpack_from(">qqqq", buf, 0)
    state = ts = counter = 0
    if len(buf) >= CHECKPOINT_SIZE:
        state, ts, counter = struct.unpack_from(">qqq", buf, 32)
    return TimerCheckpointData(
        last_read_time_ms=read,
        last_timer_log_flush_pos=flush,
        last_timer_queue_offset=queue,
        master_timer_queue_offset=master,
        state_version=state,
        timestamp=ts,
        counter=counter,
    )
