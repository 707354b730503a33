"""Validity check, blank marker, batch body, properties, tags code and offset msg id."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.errors import MessageCodecError
from rocketpy.common.javahash import java_string_hash
from rocketpy.common.message.batch_body import BatchItem, decode_batch_body, encode_batch_body
from rocketpy.common.message.decoder import (
    decode_offset_msg_id,
    decode_records,
    encode_offset_msg_id,
    offset_msg_ids,
)
from rocketpy.common.message.properties import (
    decode_properties,
    encode_properties,
    keys_of,
    property_value,
    property_values,
    tags_code,
    tags_code_of,
)
from rocketpy.common.message.record import MessageRecord, choose_magic, encode_record
from rocketpy.store.commit_log.record import (
    BLANK_MAGIC,
    CheckStatus,
    check_record,
    encode_blank,
    valid_record_size,
)

REC = MessageRecord(topic="T1", queue_id=1, body=b"payload", properties="TAGS\x01a\x02")


def test_record_check_torn_tail_is_invalid() -> None:
    """1. Encode a record. 2. Check every strict prefix of it.
    Expected: every prefix is INVALID; the full record is VALID."""
    raw = encode_record(REC)
    for cut in range(len(raw)):
        assert check_record(raw[:cut]).status is CheckStatus.INVALID, cut
    assert check_record(raw).status is CheckStatus.VALID


def test_record_check_body_crc_mismatch() -> None:
    """1. Flip one body byte of a record. 2. Check with and without CRC checking.
    Expected: INVALID with CRC on; VALID with CRC off."""
    raw = bytearray(encode_record(REC))
    raw[88] ^= 0xFF
    assert check_record(raw).status is CheckStatus.INVALID
    assert check_record(raw, check_crc=False).status is CheckStatus.VALID


def test_record_check_total_size_mismatch() -> None:
    """1. Append one byte to a record and enlarge TOTALSIZE by one. 2. Check.
    Expected: INVALID (the recomputed length disagrees)."""
    raw = bytearray(encode_record(REC) + b"\0")
    raw[0:4] = (len(raw)).to_bytes(4, "big")
    check = check_record(raw)
    assert check.status is CheckStatus.INVALID
    assert "not equals" in check.reason


def test_record_check_blank_marker_and_garbage() -> None:
    """1. Check a blank marker. 2. Check zeros. 3. Check a record at a non-zero position.
    Expected: END_OF_FILE; INVALID; VALID with the record's size."""
    blank = encode_blank(100)
    assert blank == (100).to_bytes(4, "big") + (BLANK_MAGIC & 0xFFFFFFFF).to_bytes(4, "big")
    assert check_record(blank).status is CheckStatus.END_OF_FILE
    assert check_record(bytes(64)).status is CheckStatus.INVALID
    raw = encode_record(REC)
    check = check_record(b"xyz" + raw, 3)
    assert check.status is CheckStatus.VALID
    assert check.size == len(raw)


@given(
    body=st.binary(max_size=300),
    topic=st.text(min_size=1, max_size=140).filter(lambda t: len(t.encode()) <= 300),
    born=st.sampled_from([("127.0.0.1", 1), ("::1", 2)]),
    flip=st.integers(min_value=0, max_value=10_000),
)
def test_record_valid_size_agrees_with_check_record(
    body: bytes, topic: str, born: tuple[str, int], flip: int
) -> None:
    """1. Encode a record (v1 or v2 magic, IPv4 or IPv6 born host) at position 5 of a buffer.
    2. Ask valid_record_size of it whole, of every torn prefix, and with one byte flipped.
    Expected: the same verdict as check_record each time (size, 0 for a blank marker, -1 for
    invalid), with and without the CRC check."""
    raw = encode_record(MessageRecord(topic=topic, queue_id=1, body=body, born_host=born,
                                      properties="TAGS\x01a\x02",
                                      magic=choose_magic(topic.encode())))  # fmt: skip

    def agree(buf: bytes) -> None:
        for crc in (True, False):
            check = check_record(buf, 5, check_crc=crc)
            want = {CheckStatus.VALID: check.size, CheckStatus.END_OF_FILE: 0}.get(check.status, -1)
            assert valid_record_size(memoryview(buf), 5, check_crc=crc) == want

    agree(b"xxxxx" + raw)
    for cut in range(0, len(raw), 7):
        agree(b"xxxxx" + raw[:cut])
    flipped = bytearray(raw)
    flipped[flip % len(raw)] ^= 0x41
    agree(b"xxxxx" + bytes(flipped))
    agree(b"xxxxx" + encode_blank(64))


def test_record_decode_records_concatenated() -> None:
    """1. Concatenate two records. 2. decode_records.
    Expected: both records in order; garbage raises MessageCodecError."""
    other = MessageRecord(topic="T2", queue_id=2, body=b"x")
    assert decode_records(encode_record(REC) + encode_record(other)) == [REC, other]
    with pytest.raises(MessageCodecError):
        decode_records(b"\0" * 16)


def test_record_properties_decode_rules() -> None:
    """1. Decode strings with short segments, a leading separator, an empty value and duplicates.
    Expected: those segments are dropped and the last duplicate wins."""
    text = "a\x02\x01xy\x02K\x01\x02DUP\x011\x02DUP\x012\x02KEYS\x01k1 k2\x02"
    assert decode_properties(text) == {"DUP": "2", "KEYS": "k1 k2"}
    assert encode_properties({"A": "1", "B": "2"}) == "A\x011\x02B\x012\x02"


_PROP_TEXT = st.lists(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "K", "", "xTAGS", "\x01", "\x02", "a b", "é"]),
    max_size=14,
).map("".join)


@given(_PROP_TEXT)
def test_record_property_lookups_agree_with_decode(text: str) -> None:
    """1. Build property strings from names, separators and values in any order (duplicates,
    empty values, names inside values). 2. Read the tags code, KEYS, UNIQ_KEY and single
    properties with the in-place lookups.
    Expected: the same values as the full decoder gives."""
    props = decode_properties(text)
    assert (tags_code_of(text), *keys_of(text)) == (
        tags_code(props.get("TAGS")),
        props.get("KEYS", ""),
        props.get("UNIQ_KEY"),
    )
    for name in ("TAGS", "KEYS", "UNIQ_KEY", "K", "xTAGS"):
        assert property_value(text, name) == props.get(name)


@given(st.lists(_PROP_TEXT, max_size=6))
def test_record_a_batchs_property_lookups_agree_with_decode(texts: list[str]) -> None:
    """1. Build several property strings as above. 2. Read one property of all of them with
    property_values.
    Expected: each text's value as the full decoder gives it, None where it has none."""
    for name in ("UNIQ_KEY", "TAGS", "K"):
        assert property_values(texts, name) == [decode_properties(t).get(name) for t in texts]


def test_record_tags_hash_matches_java() -> None:
    """1. Hash known strings. Expected: Java String.hashCode values, including wrap-around."""
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("中") == 20013
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # two UTF-16 units
    assert tags_code(None) == 0
    assert tags_code("") == 0


@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=50), st.text())))
def test_record_batch_body_round_trip(raw: list[tuple[int, bytes, str]]) -> None:
    """1. Encode a batch body of arbitrary items. 2. Decode it.
    Expected: the same items in order."""
    items = [BatchItem(flag=f, body=b, properties=p) for f, b, p in raw]
    assert decode_batch_body(encode_batch_body(items)) == items


def test_record_batch_body_truncated() -> None:
    """1. Cut a two-item batch body short. Expected: MessageCodecError naming a field."""
    body = encode_batch_body([BatchItem(flag=0, body=b"abc", properties="A\x011\x02")] * 2)
    with pytest.raises(MessageCodecError) as err:
        decode_batch_body(body[:-3])
    assert err.value.field


def test_record_offset_msg_id() -> None:
    """1. Encode IPv4 and IPv6 offset ids. 2. Decode them.
    Expected: 32/56 uppercase hex characters; decode gives host, port, offset."""
    msg_id = encode_offset_msg_id(("192.168.1.2", 10911), 4096)
    assert msg_id == "C0A8010200002A9F0000000000001000"
    assert decode_offset_msg_id(msg_id) == (("192.168.1.2", 10911), 4096)
    v6 = encode_offset_msg_id(("::1", 1), 7)
    assert len(v6) == 56
    assert decode_offset_msg_id(v6) == (("::1", 1), 7)
    with pytest.raises(MessageCodecError):
        decode_offset_msg_id("ZZ" * 16)


@given(
    st.sampled_from([("192.168.1.2", 10911), ("::1", 1), ("10.0.0.1", -1)]),
    st.lists(st.integers(0, 2**63 - 1), max_size=40),
)
def test_a_batch_answers_each_records_offset_id_joined(
    host: tuple[str, int], offsets: list[int]
) -> None:
    """1. Join a batch's offset msg ids with offset_msg_ids (IPv4 and IPv6 hosts, any count).
    Expected: the same text as encode_offset_msg_id of each offset joined by commas."""
    prefix = encode_offset_msg_id(host, 0)[:-16]
    expected = ",".join(encode_offset_msg_id(host, offset) for offset in offsets)
    assert offset_msg_ids(prefix, offsets) == expected
