"""Golden bytes of an index file (store.md section 9) and the Java key hash."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.javahash import java_string_hash
from rocketpy.store.index.index_file import IndexFile
from rocketpy.store.index.record import (
    IndexEntry,
    IndexHeader,
    decode_index_entry,
    decode_index_header,
    encode_index_entry,
    encode_index_header,
    index_file_name,
    index_key_hash,
)
from tests.helpers.golden import load_hex

HERE = Path(__file__).parent / "index_file"


def test_index_file_golden_bytes(tmp_path: Path) -> None:
    """1. Create a 4-slot, 4-entry index file. 2. Put T#a@100, T#b@200, T#a@300 at the golden
    timestamps. 3. Close. Expected: the file equals the golden bytes and is now full; its header
    decodes to the golden header."""
    golden = load_hex(HERE / "three_keys.hex")
    f = IndexFile.create(tmp_path / "20231114221320000", 4, 4)
    assert f.put_key("T#a", 100, 1_700_000_000_000)
    assert f.put_key("T#b", 200, 1_700_000_002_500)
    assert f.put_key("T#a", 300, 1_700_000_005_999)
    assert f.is_write_full()
    assert not f.put_key("T#c", 400, 1_700_000_006_000)
    f.close()
    assert (tmp_path / "20231114221320000").read_bytes() == golden
    assert decode_index_header(golden) == IndexHeader(
        begin_timestamp=1_700_000_000_000,
        end_timestamp=1_700_000_005_999,
        begin_phy_offset=100,
        end_phy_offset=300,
        hash_slot_count=2,
        index_count=4,
    )
    assert encode_index_header(decode_index_header(golden)) == golden[:40]
    assert decode_index_entry(golden, 40 + 16 + 3 * 20) == IndexEntry(
        key_hash=81906, phy_offset=300, time_diff=5, prev_index=1
    )


@pytest.mark.parametrize(
    ("text", "java_hash", "key_hash"),
    [
        ("", 0, 0),
        ("hello", 99162322, 99162322),
        ("Hello World", -862545276, 862545276),  # negative: abs
        ("polygenelubricants", -(2**31), 0),  # Integer.MIN_VALUE: abs overflows -> 0
        ("Aa", 2112, 2112),
        ("BB", 2112, 2112),
        ("\U0001f600", 1772899, 1772899),  # surrogate pair: two UTF-16 units
    ],
)
def test_index_key_hash_java_values(text: str, java_hash: int, key_hash: int) -> None:
    """String.hashCode values known from Java, and indexKeyHashMethod's abs/overflow rule."""
    assert java_string_hash(text) == java_hash
    assert index_key_hash(text) == key_hash


def test_index_file_name_format() -> None:
    """timeMillisToHumanString: yyyyMMddHHmmssSSS (UTC here; local time by default)."""
    assert index_file_name(1_700_000_000_123, UTC) == "20231114221320123"
    assert index_file_name(1_700_000_000_007, UTC) == "20231114221320007"


_i64 = st.integers(-(2**63), 2**63 - 1)
_i32 = st.integers(-(2**31), 2**31 - 1)


_headers = st.builds(
    IndexHeader,
    begin_timestamp=_i64,
    end_timestamp=_i64,
    begin_phy_offset=_i64,
    end_phy_offset=_i64,
    hash_slot_count=_i32,
    index_count=st.integers(1, 2**31 - 1),
)


@given(_headers)
def test_index_header_round_trip(header: IndexHeader) -> None:
    """decode(encode(header)) == header."""
    assert decode_index_header(encode_index_header(header)) == header


@given(_i32, _i64, _i32, _i32)
def test_index_entry_round_trip(a: int, b: int, c: int, d: int) -> None:
    """decode(encode(entry)) == entry."""
    entry = IndexEntry(key_hash=a, phy_offset=b, time_diff=c, prev_index=d)
    assert decode_index_entry(encode_index_entry(entry)) == entry
