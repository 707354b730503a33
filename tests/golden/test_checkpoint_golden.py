"""Golden bytes of the ``checkpoint`` page (store.md section 6)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rocketpy.store.checkpoint import (
    CHECKPOINT_FILE_SIZE,
    CheckpointValues,
    StoreCheckpoint,
    decode_checkpoint,
    encode_checkpoint,
)
from tests.helpers.golden import load_hex

HERE = Path(__file__).parent / "checkpoint"


GOLDEN_VALUES = CheckpointValues(
    physic_msg_timestamp=1700000000123,
    logics_msg_timestamp=1700000000045,
    index_msg_timestamp=1699999990000,
    master_flushed_offset=1073741824,
    confirm_phy_offset=1073741000,
)


def test_checkpoint_golden_encode_decode() -> None:
    """1. Encode the values of the golden case. 2. Decode the golden page.
    Expected: byte-identical page of 4096 bytes; decoding gives the same values."""
    golden = load_hex(HERE / "controller_mode.hex")
    assert len(golden) == CHECKPOINT_FILE_SIZE
    assert encode_checkpoint(GOLDEN_VALUES) == golden
    assert decode_checkpoint(golden) == GOLDEN_VALUES


def test_checkpoint_golden_file_written_by_store_checkpoint(tmp_path: Path) -> None:
    """1. Open a new checkpoint file, set the golden values, flush, close.
    Expected: the file on disk is exactly the golden page."""
    cp = StoreCheckpoint.open(tmp_path / "checkpoint")
    cp.physic_msg_timestamp = GOLDEN_VALUES.physic_msg_timestamp
    cp.logics_msg_timestamp = GOLDEN_VALUES.logics_msg_timestamp
    cp.index_msg_timestamp = GOLDEN_VALUES.index_msg_timestamp
    cp.master_flushed_offset = GOLDEN_VALUES.master_flushed_offset
    cp.confirm_phy_offset = GOLDEN_VALUES.confirm_phy_offset
    cp.flush()
    cp.close()
    assert (tmp_path / "checkpoint").read_bytes() == load_hex(HERE / "controller_mode.hex")


_int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(_int64, _int64, _int64, _int64, _int64)
def test_checkpoint_round_trip(a: int, b: int, c: int, d: int, e: int) -> None:
    """decode(encode(v)) == v for any int64 values."""
    values = CheckpointValues(
        physic_msg_timestamp=a,
        logics_msg_timestamp=b,
        index_msg_timestamp=c,
        master_flushed_offset=d,
        confirm_phy_offset=e,
    )
    assert decode_checkpoint(encode_checkpoint(values)) == values
