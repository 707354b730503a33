"""Golden bytes of ``epochFileCheckpoint`` (ha.md section 4.2) and codec round-trips."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.store.epoch_entries import (
    LONG_MAX,
    EpochEntry,
    decode_epoch_file,
    encode_epoch_file,
    link_end_offsets,
)
from tests.helpers.golden import load_hex

HERE = Path(__file__).parent / "epoch_file"


@pytest.mark.parametrize(
    ("case", "pairs"),
    [
        ("two_entries", [(1, 0), (2, 1048576)]),
        ("upstream_javadoc", [(7, 7000), (8, 8000)]),
    ],
)
def test_epoch_file_golden(case: str, pairs: list[tuple[int, int]]) -> None:
    """1. Encode the entries. 2. Decode the golden bytes.
    Expected: identical bytes; decoding links ends (next start, last unbounded)."""
    golden = load_hex(HERE / f"{case}.hex")
    entries = [EpochEntry(epoch=e, start_offset=s) for e, s in pairs]
    assert encode_epoch_file(entries) == golden
    decoded = decode_epoch_file(golden)
    assert [(e.epoch, e.start_offset) for e in decoded] == pairs
    assert decoded[0].end_offset == pairs[1][1]
    assert decoded[-1].end_offset == LONG_MAX


@st.composite
def _histories(draw: st.DrawFn) -> list[EpochEntry]:
    n = draw(st.integers(0, 8))
    epochs = sorted(draw(st.sets(st.integers(0, 2**31 - 1), min_size=n, max_size=n)))
    starts = sorted(draw(st.sets(st.integers(0, 2**63 - 1), min_size=n, max_size=n)))
    return [EpochEntry(epoch=e, start_offset=s) for e, s in zip(epochs, starts, strict=True)]


@given(_histories())
def test_epoch_file_round_trip(entries: list[EpochEntry]) -> None:
    """decode(encode(entries)) == entries with linked end offsets."""
    assert decode_epoch_file(encode_epoch_file(entries)) == link_end_offsets(entries)
