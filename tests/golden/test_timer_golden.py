"""Golden vectors of the timer store's files (``rocketpy/store/timer/record.py``): a timer-log
unit, the segment-closing blank record, a wheel slot and the ``timercheck`` page."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rocketpy.store.timer.record import (
    MAGIC_DEFAULT,
    MAGIC_ROLL,
    Slot,
    TimerCheckpointData,
    TimerLogUnit,
    decode_checkpoint,
    decode_slot,
    decode_unit,
    encode_blank,
    encode_checkpoint,
    encode_slot,
    encode_unit,
    java_string_hash,
)
from rocketpy.store.timer.timer_checkpoint import TimerCheckpoint
from tests.helpers.golden import load_hex

HERE = Path(__file__).parent / "timer"

UNIT = TimerLogUnit(
    prev_pos=416,
    magic=MAGIC_DEFAULT | MAGIC_ROLL,
    write_time_ms=1_700_000_000_000,
    delay_ms=5000,
    offset_py=65536,
    size_py=200,
    topic_hash=java_string_hash("TopicTest"),
)
CHECKPOINT = TimerCheckpointData(
    last_read_time_ms=1_700_000_000_000,
    last_timer_log_flush_pos=3328,
    last_timer_queue_offset=42,
    master_timer_queue_offset=42,
    state_version=0,
    timestamp=1_700_000_000_123,
    counter=7,
)


def test_timer_golden_unit() -> None:
    golden = load_hex(HERE / "unit_roll.hex")
    assert encode_unit(UNIT) == golden
    decoded = decode_unit(golden)
    assert decoded == UNIT
    assert (decoded.delayed_time_ms, decoded.is_roll, decoded.is_delete) == (
        1_700_000_005_000,
        True,
        False,
    )


def test_timer_golden_blank() -> None:
    assert encode_blank(40) == load_hex(HERE / "blank.hex")


def test_timer_golden_slot() -> None:
    golden = load_hex(HERE / "slot.hex")
    slot = Slot(time_ms=1_700_000_000_100, first_pos=0, last_pos=104, num=3)
    assert encode_slot(slot, 100) == golden
    assert decode_slot(golden, 0, 100) == slot


def test_timer_golden_checkpoint_file(tmp_path: Path) -> None:
    """The page written by TimerCheckpoint is the golden page; the body is its first 56 bytes;
    reading the file back gives the values."""
    golden = load_hex(HERE / "timercheck.hex")
    assert encode_checkpoint(CHECKPOINT) == golden[:56]
    assert decode_checkpoint(golden) == CHECKPOINT
    cp = TimerCheckpoint(tmp_path / "config" / "timercheck")
    cp.write(CHECKPOINT)
    assert cp.path.read_bytes() == golden
    assert TimerCheckpoint(cp.path).load() == CHECKPOINT


def test_timer_golden_checkpoint_without_data_version() -> None:
    """An older 32-byte encoding decodes with a zero DataVersion (TimerCheckpoint.decode)."""
    golden = load_hex(HERE / "timercheck.hex")[:32]
    assert decode_checkpoint(golden) == TimerCheckpointData(
        last_read_time_ms=1_700_000_000_000,
        last_timer_log_flush_pos=3328,
        last_timer_queue_offset=42,
        master_timer_queue_offset=42,
    )


_long = st.integers(-(1 << 63), (1 << 63) - 1)
_int = st.integers(-(1 << 31), (1 << 31) - 1)


@given(
    st.builds(
        TimerLogUnit, prev_pos=_long, magic=_int, write_time_ms=_long, delay_ms=_int,
        offset_py=_long, size_py=_int, topic_hash=_int,
    )
)  # fmt: skip
def test_timer_unit_round_trip(unit: TimerLogUnit) -> None:
    assert decode_unit(encode_unit(unit)) == unit


def test_timer_java_string_hash() -> None:
    """Java's String.hashCode: known values, including a non-BMP character (two UTF-16 units)."""
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash(None) == 0
    assert java_string_hash("TopicTest") == -1902610879
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
