"""The timer store's files and arithmetic: wheel slots by time, the roll rule, precision
rounding, timer-log appends across segments and the recovery scan that cuts a torn tail."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.store.timer.record import (
    EMPTY_SLOT,
    MAGIC_DEFAULT,
    MIN_BLANK_LEN,
    SLOTS_TOTAL,
    UNIT_SIZE,
    TimerLogUnit,
    effective_precision_ms,
    format_time_ms,
    offset_for_last_unit,
    roll_target,
    roll_window_slots,
    slot_index,
)
from rocketpy.store.timer.timer_log import TimerLog
from rocketpy.store.timer.timer_wheel import IGNORE, TimerWheel


@pytest.mark.parametrize(
    ("time_ms", "precision", "index"),
    [
        (0, 1000, 0),
        (999, 1000, 0),
        (1000, 1000, 1),
        (SLOTS_TOTAL * 2 * 1000, 1000, 0),  # the wheel wraps after slotsTotal * 2 slots
        (SLOTS_TOTAL * 2 * 1000 + 2500, 1000, 2),
        (1234, 100, 12),
    ],
)
def test_timer_slot_index(time_ms: int, precision: int, index: int) -> None:
    assert slot_index(time_ms, precision) == index


@pytest.mark.parametrize(
    ("configured", "effective"),
    [(1, 100), (100, 100), (199, 100), (200, 200), (499, 200), (500, 500), (999, 500),
     (1000, 1000), (5000, 1000)],
)  # fmt: skip
def test_timer_precision_rounded_down(configured: int, effective: int) -> None:
    assert effective_precision_ms(configured) == effective


def test_timer_roll_rule() -> None:
    """doEnqueue: within the window -> no roll; just past it -> half a window ahead (room for
    the next roll); far past it -> a whole window ahead."""
    write, window, prec = 1_000_000, 30, 1000
    assert roll_target(write + 29_999, write, window, prec) is None
    assert roll_target(write + 30_000, write, window, prec) == write + 15_000
    assert roll_target(write + 30_000 + 9_999, write, window, prec) == write + 15_000
    assert roll_target(write + 30_000 + 10_000, write, window, prec) == write + 30_000
    assert roll_window_slots(1) == SLOTS_TOTAL - 60
    assert roll_window_slots(SLOTS_TOTAL) == SLOTS_TOTAL - 60
    assert roll_window_slots(3600) == 3600
    assert format_time_ms(1_700_000_000_999, 500) == 1_700_000_000_500


def test_timer_wheel_slots_by_time(tmp_path: Path) -> None:
    """A slot answers only for the time it holds: the same index one wheel-turn later is empty;
    revise_slot moves a live slot's chain end, and replaces a stale one only when forced."""
    wheel = TimerWheel(tmp_path / "timerwheel", 100)
    wheel.open()
    try:
        t = 1_700_000_000_100
        assert wheel.get_slot(t) is EMPTY_SLOT
        wheel.put_slot(t, 0, 52, 2, 0)
        slot = wheel.get_slot(t + 99)  # same slot
        assert (slot.time_ms, slot.first_pos, slot.last_pos, slot.num) == (t, 0, 52, 2)
        turn = SLOTS_TOTAL * 2 * 100
        assert wheel.get_slot(t + turn) is EMPTY_SLOT
        wheel.revise_slot(t, IGNORE, 104, force=False)
        assert (wheel.get_slot(t).first_pos, wheel.get_slot(t).last_pos) == (0, 104)
        wheel.revise_slot(t + turn, IGNORE, 156, force=False)
        assert wheel.get_slot(t).last_pos == 104
        wheel.revise_slot(t + turn, IGNORE, 156, force=True)
        assert wheel.get_slot(t) is EMPTY_SLOT
        assert (wheel.get_slot(t + turn).first_pos, wheel.get_slot(t + turn).last_pos) == (156, 156)
        assert wheel.check_phy_pos(t + turn, 200) == 1 << 63
        assert wheel.check_phy_pos(t + turn, 100) == 156
        assert wheel.all_num(t + turn, 10) == 0
    finally:
        wheel.close()
    assert (tmp_path / "timerwheel").stat().st_size == SLOTS_TOTAL * 2 * 32


def test_timer_wheel_scan_leaves_its_pages_out_of_rss_and_its_slots_intact(tmp_path: Path) -> None:
    """1. Open a wheel, put a slot, scan the whole wheel (check_phy_pos, as recovery does).
    2. Read the slot back, put a second one, close and reopen.
    Expected: the scan leaves (well) under a tenth of the 37 MB wheel resident in this process;
    both slots read back before and after the reopen."""
    wheel = TimerWheel(tmp_path / "timerwheel", 1000)
    wheel.open()
    t = 1_700_000_000_000
    try:
        wheel.put_slot(t, 0, 52, 2, 0)
        before = _rss_kb()
        assert wheel.check_phy_pos(t, 10) == 0
        assert _rss_kb() - before < wheel.length // 10 // 1024
        assert wheel.get_slot(t).last_pos == 52
        wheel.put_slot(t + 1000, 52, 104, 1, 0)
    finally:
        wheel.close()
    wheel.open()
    try:
        assert (wheel.get_slot(t).num, wheel.get_slot(t + 1000).last_pos) == (2, 104)
    finally:
        wheel.close()


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_timer_wheel_wrong_length_refused(tmp_path: Path) -> None:
    (tmp_path / "timerwheel").write_bytes(b"x" * 100)
    with pytest.raises(ValueError, match="Timer wheel length"):
        TimerWheel(tmp_path / "timerwheel", 1000).open()


def _unit(i: int) -> TimerLogUnit:
    return TimerLogUnit(prev_pos=-1, magic=MAGIC_DEFAULT, write_time_ms=1000 * i, delay_ms=500,
                        offset_py=i, size_py=10, topic_hash=0)  # fmt: skip


def _append(log: TimerLog, unit: TimerLogUnit) -> int:
    if log.needs_segment():
        log.add(log.create_next())
    return log.append(unit)


def test_timer_log_segments_and_recovery(tmp_path: Path) -> None:
    """1. Append 10 units into 256-byte segments (4 units + a blank each). 2. Reopen and
    recover from 0. Expected: every unit revised in order at its position, the end is after the
    last unit. 3. Zero half of the last unit (a torn tail), recover again. Expected: the end
    moves back one unit and the torn unit is not revised."""
    size = 256
    log = TimerLog(tmp_path / "timerlog", size)
    positions = [_append(log, _unit(i)) for i in range(10)]
    per_segment = (size - MIN_BLANK_LEN) // UNIT_SIZE
    assert per_segment == 4
    assert positions[:5] == [0, 52, 104, 156, 256]
    assert offset_for_last_unit(size) == 156
    end = log.max_offset
    log.flush()
    log.close()

    revised: list[tuple[int, int]] = []
    again = TimerLog(tmp_path / "timerlog", size)
    again.load()
    assert again.recover(0, lambda t, p: revised.append((t, p))) == end
    assert revised == [(1000 * i + 500, positions[i]) for i in range(10)]
    assert again.read_unit(positions[9]) == _unit(9)
    last = again.queue.last
    assert last is not None
    last.buffer[
        positions[9] - last.file_from_offset + 20 : positions[9] - last.file_from_offset + 52
    ] = bytes(32)
    last.buffer[positions[9] - last.file_from_offset : positions[9] - last.file_from_offset + 4] = (
        bytes(4)
    )
    again.close()

    revised.clear()
    third = TimerLog(tmp_path / "timerlog", size)
    third.load()
    assert third.recover(positions[8], lambda t, p: revised.append((t, p))) == positions[9]
    assert revised == [(1000 * 8 + 500, positions[8])]  # scan starts at the segment holding 8
    assert third.read_unit(positions[9]) is None
    third.close()


def test_timer_log_expired_segments(tmp_path: Path) -> None:
    """Segments whose last unit names a commit-log offset below the commit log's minimum are
    taken off, oldest first, never the last segment; units still in the log stay readable."""
    log = TimerLog(tmp_path / "timerlog", 256)
    positions = [_append(log, _unit(i)) for i in range(10)]  # offset_py = i; 4 units a segment
    assert len(log.queue.files) == 3
    assert log.expired_segments(3) == []  # segment 0's last unit names offset 3: still there
    gone = log.expired_segments(4)
    assert [mf.file_from_offset for mf in gone] == [0]
    for mf in gone:
        mf.destroy()
    assert log.read_unit(positions[0]) is None
    assert log.read_unit(positions[4]) == _unit(4)
    assert [mf.file_from_offset for mf in log.expired_segments(1000)] == [256]
    assert len(log.queue.files) == 1  # the segment being written stays
    assert log.read_unit(positions[9]) == _unit(9)
    log.close()
