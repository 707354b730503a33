"""The validity check recovery and dispatch use (message-format.md 1.1, 1.2)."""

from __future__ import annotations

import pytest

from rocketpy.common.errors import CodecError
from rocketpy.store.commit_log.record import (
    MessageRecord,
    check_record,
    decode_record,
    encode_blank,
    encode_record,
    record_length,
)

REC = MessageRecord(topic="T", body=b"payload", properties="KEYS\x01a\x02")


def test_record_length_v1_ipv4_is_91_plus_parts() -> None:
    """calMsgLength for v1 and IPv4 hosts is 91 + body + topic + properties."""
    assert record_length(7, 1, 7) == 91 + 7 + 1 + 7
    assert len(encode_record(REC)) == record_length(7, 1, 7)


def test_check_record_valid_blank_and_torn() -> None:
    """A whole record is valid; the blank marker is the file's end; any cut is invalid."""
    data = encode_record(REC)
    assert check_record(data + b"\0" * 8).size == len(data)
    assert check_record(encode_blank(4000)).size == 0
    for cut in (3, 8, 50, len(data) - 1):
        assert check_record(data[:cut]).size == -1


def test_check_record_crc_mismatch_is_invalid() -> None:
    """A flipped body byte fails the CRC check (and passes with checking off)."""
    data = bytearray(encode_record(REC))
    data[88] ^= 0xFF
    assert check_record(bytes(data)).size == -1
    assert check_record(bytes(data), check_crc=False).size == len(data)


def test_decode_record_bad_magic_names_field() -> None:
    """A wrong magic raises CodecError naming MAGICCODE."""
    data = bytearray(encode_record(REC))
    data[4:8] = b"\0\0\0\0"
    with pytest.raises(CodecError, match="MAGICCODE"):
        decode_record(bytes(data))


def test_encode_record_v2_for_long_topics() -> None:
    """Topics over 127 bytes get the v2 magic and a 2-byte topic length."""
    data = encode_record(MessageRecord(topic="t" * 200, body=b"x"))
    assert data[4:8] == bytes.fromhex("daa320ab")
    assert decode_record(data).topic == "t" * 200


def test_encode_record_refuses_oversized_properties() -> None:
    """Properties over 32767 bytes cannot be stored."""
    with pytest.raises(CodecError, match="properties"):
        encode_record(MessageRecord(topic="T", body=b"", properties="x" * 40000))
