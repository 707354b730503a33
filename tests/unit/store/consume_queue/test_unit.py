"""The 20-byte consume-queue unit (store.md section 4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.errors import CodecError
from rocketpy.store.consume_queue.unit import (
    BLANK_UNIT,
    CqUnit,
    decode_unit,
    encode_unit,
)


def test_unit_golden_bytes() -> None:
    """1. Encode offset 4096, size 123, tags code of "TagA". 2. Decode the bytes.
    Expected: 8+4+8 big-endian bytes as assembled below; decode gives the unit back."""
    unit = CqUnit(commit_log_offset=4096, size=123, tags_code=2598919)
    golden = bytes.fromhex(
        "0000000000001000"  # commit-log offset 4096
        "0000007b"  # size 123
        "000000000027a807"  # tags code 2598919
    )
    assert encode_unit(unit) == golden
    assert decode_unit(golden) == unit
    assert unit.valid


def test_unit_validity_and_placeholder() -> None:
    """1. Check the fillPreBlank placeholder, a zero unit and a negative offset.
    Expected: placeholder is {0, 0x7FFFFFFF, 0} and valid; zero/negative units are invalid."""
    assert encode_unit(BLANK_UNIT) == bytes(8) + b"\x7f\xff\xff\xff" + bytes(8)
    assert BLANK_UNIT.valid
    assert not decode_unit(bytes(20)).valid
    assert not CqUnit(commit_log_offset=-1, size=5, tags_code=0).valid


def test_unit_truncated() -> None:
    """1. Decode 19 bytes. Expected: CodecError naming the offset."""
    with pytest.raises(CodecError):
        decode_unit(bytes(19))


@given(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
)
def test_unit_round_trip(offset: int, size: int, tags: int) -> None:
    """1. Encode an arbitrary unit. 2. Decode at a non-zero position.
    Expected: 20 bytes; the same unit back."""
    unit = CqUnit(commit_log_offset=offset, size=size, tags_code=tags)
    raw = encode_unit(unit)
    assert len(raw) == 20
    assert decode_unit(b"ab" + raw, 2) == unit
