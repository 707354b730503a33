"""DLedger entry, blank tail and index unit codec (dledger-commitlog.md sections 1.2-1.4).

Expected bytes are assembled here one field per line (or read back with ``struct`` directly),
never with the codec under test.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.message.record import MessageRecord, encode_record
from rocketpy.store.commit_log.record import encode_blank as commit_log_blank
from rocketpy.store.dledger_log.entry import (
    DLedgerEntry,
    EntryCodecError,
    IndexUnit,
    check_entry_size,
    decode_entry,
    decode_header,
    decode_index_unit,
    encode_blank,
    encode_entry,
    encode_index_unit,
    entry_pos_of,
    fits,
    record_offset,
    validate_header,
)


def _record(body: bytes = b"hello", queue_offset: int = 0) -> bytes:
    return encode_record(MessageRecord(topic="TopicA", queue_id=1, body=body,
                                       queue_offset=queue_offset))  # fmt: skip


def test_entry_header_layout_field_by_field() -> None:
    """1. Encode an entry (index 7, term 3, pos 4096, 5-byte body).
    Expected: 48 big-endian header bytes in the order of section 1.2, then the body."""
    body = b"abcde"
    golden = b"".join([
        (1).to_bytes(4, "big"),            # magic
        (53).to_bytes(4, "big"),           # size = 48 + 5
        (7).to_bytes(8, "big"),            # index
        (3).to_bytes(8, "big"),            # term
        (4096).to_bytes(8, "big"),         # pos
        (0).to_bytes(4, "big"),            # channel
        (0).to_bytes(4, "big"),            # chainCrc
        (0).to_bytes(4, "big"),            # bodyCrc
        (5).to_bytes(4, "big"),            # body length
        body,
    ])  # fmt: skip
    entry = DLedgerEntry(index=7, term=3, pos=4096, body=body)
    assert encode_entry(entry) == golden
    assert decode_entry(golden) == entry
    h = decode_header(golden)
    assert (h.size, h.record_offset, h.end) == (53, 4096 + 48, 4096 + 53)


def test_index_unit_layout_field_by_field() -> None:
    """1. Encode a unit. Expected: magic 4 | pos 8 | size 4 | index 8 | term 8 = 32 bytes."""
    golden = b"".join([
        (1).to_bytes(4, "big"),               # magic
        (1 << 33).to_bytes(8, "big"),         # pos
        (200).to_bytes(4, "big"),             # size
        (12345).to_bytes(8, "big"),           # index
        (9).to_bytes(8, "big"),               # term
    ])  # fmt: skip
    unit = IndexUnit(magic=1, pos=1 << 33, size=200, index=12345, term=9)
    assert encode_index_unit(unit) == golden
    assert len(golden) == 32
    assert decode_index_unit(golden) == unit


def test_blank_tail_is_minus_one_then_bytes_left() -> None:
    """1. Encode the blank for 20 bytes left. Expected: int -1, int 20, 12 zero bytes (magic
    first: the reverse of the CommitLog blank)."""
    blank = encode_blank(20)
    assert struct.unpack(">ii", blank[:8]) == (-1, 20)
    assert blank[8:] == bytes(12)
    assert check_entry_size(blank) == 0
    with pytest.raises(EntryCodecError):
        encode_blank(7)


def test_fits_keeps_room_for_the_blank() -> None:
    """An entry fits only if 8 bytes remain after it (``preAppend``)."""
    assert fits(10, 48 + 10 + 8)
    assert not fits(10, 48 + 10 + 7)


def test_record_offset_is_entry_pos_plus_48() -> None:
    """Section 1.3: a message's physical offset is its entry's pos + 48, and back."""
    assert record_offset(1000) == 1048
    assert entry_pos_of(1048) == 1000


def test_check_entry_size_frames_entries() -> None:
    """``checkMessageAndReturnSize`` framing: an entry -> its size; blank -> 0; zeros, a torn
    entry, an old CommitLog record or blank -> -1."""
    rec = _record()
    raw = encode_entry(DLedgerEntry(index=0, term=1, pos=0, body=rec))
    assert check_entry_size(raw) == 48 + len(rec)
    assert check_entry_size(raw[:-1]) == -1
    assert check_entry_size(bytes(64)) == -1
    assert check_entry_size(rec) == -1
    assert check_entry_size(commit_log_blank(100)) == -1
    not_a_record = encode_entry(DLedgerEntry(index=0, term=1, pos=0, body=bytes(40)))
    assert check_entry_size(not_a_record) == -1


def test_validate_header_names_the_problem() -> None:
    """Recovery's per-entry checks: magic, pos, size == bodyLen + 48."""
    good = decode_header(encode_entry(DLedgerEntry(index=0, term=1, pos=96, body=b"x" * 10)))
    assert validate_header(good, at=96) is None
    assert "pos" in (validate_header(good, at=0) or "")
    bad_magic = decode_header(encode_entry(DLedgerEntry(index=0, term=1, pos=0, body=b"x",
                                                        magic=2)))  # fmt: skip
    assert "magic" in (validate_header(bad_magic, at=0) or "")
    raw = bytearray(encode_entry(DLedgerEntry(index=0, term=1, pos=0, body=b"xy")))
    struct.pack_into(">i", raw, 44, 5)
    assert "size" in (validate_header(decode_header(raw), at=0) or "")
    with pytest.raises(EntryCodecError):
        decode_entry(raw)
    with pytest.raises(EntryCodecError):
        decode_header(raw[:47])


@given(
    index=st.integers(0, 2**62),
    term=st.integers(0, 2**62),
    pos=st.integers(0, 2**62),
    body=st.binary(max_size=300),
)
def test_entry_round_trip(index: int, term: int, pos: int, body: bytes) -> None:
    """Any entry decodes back to itself, and struct reads the same header."""
    entry = DLedgerEntry(index=index, term=term, pos=pos, body=body)
    raw = encode_entry(entry)
    assert decode_entry(raw) == entry
    assert struct.unpack_from(">iiqqqiiii", raw) == (1, 48 + len(body), index, term, pos, 0, 0,
                                                     0, len(body))  # fmt: skip
