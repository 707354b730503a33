"""decode_message_exts (the consumer's one-pass pull-body decoder) against a reference path
(the shared decode_records, then MessageExt built field by field) and the record encoder."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy.client.consume_service import restore_topic
from rocketpy.client.message import MessageExt, decode_message_exts
from rocketpy.common.errors import MessageCodecError
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.decoder import decode_records, encode_offset_msg_id, uncompress_body
from rocketpy.common.message.properties import decode_properties, encode_properties, property_value
from rocketpy.common.message.record import MAGIC_V2, MessageRecord, choose_magic, encode_record

# One stored record assembled field by field (message-format.md section 1, v1, IPv4 hosts).
_GOLDEN = bytes.fromhex(
    "00000070"  # TOTALSIZE 112
    "daa320a7"  # MAGICCODE v1
    "00000000"  # BODYCRC (not checked by the client)
    "00000002"  # QUEUEID 2
    "00000005"  # FLAG 5
    "0000000000000009"  # QUEUEOFFSET 9
    "0000000000000400"  # PHYSICALOFFSET 1024
    "00000000"  # SYSFLAG
    "0000018bcfe56800"  # BORNTIMESTAMP 1700000000000
    "0a000001" "00001388"  # BORNHOST 10.0.0.1:5000
    "0000018bcfe56801"  # STORETIMESTAMP 1700000000001
    "7f000001" "00002a9f"  # STOREHOST 127.0.0.1:10911
    "00000003"  # RECONSUMETIMES 3
    "0000000000000000"  # PREPARED_TRANSACTION_OFFSET
    "00000002" "6869"  # BODYLEN 2, BODY "hi"
    "01" "54"  # TOPICLEN 1, TOPIC "T"
    "0012" "5441475301610255"  # PROPLEN 18, "TAGS\x01a\x02U"
    "4e49515f4b4559014b02"  # "NIQ_KEY\x01K\x02"
)  # fmt: skip


def _reference(body: bytes, broker: str) -> list[MessageExt]:
    """MessageExt built field by field from each decoded MessageRecord (no CRC: a client's)."""
    out: list[MessageExt] = []
    pos = 0
    for rec in decode_records(body, check_crc=False):
        (size,) = struct.unpack_from(">i", body, pos)
        pos += size
        props = decode_properties(rec.properties)
        offset_id = encode_offset_msg_id(rec.store_host, rec.physical_offset)
        out.append(
            MessageExt(
                topic=rec.topic,
                body=uncompress_body(rec.body, rec.sys_flag),
                properties=props,
                msg_id=props.get(MessageConst.UNIQ_KEY) or offset_id,
                offset_msg_id=offset_id,
                broker_name=broker,
                queue_id=rec.queue_id,
                queue_offset=rec.queue_offset,
                commit_log_offset=rec.physical_offset,
                store_size=size,
                flag=rec.flag,
                sys_flag=rec.sys_flag,
                born_timestamp=rec.born_timestamp,
                born_host=rec.born_host,
                store_timestamp=rec.store_timestamp,
                store_host=rec.store_host,
                reconsume_times=rec.reconsume_times,
                prepared_transaction_offset=rec.prepared_transaction_offset,
            )
        )
    return out


def test_decode_message_exts_golden_record_matches_reference() -> None:
    """1. Decode a record assembled field by field with both decoders.
    Expected: identical MessageExt values; every field is the one written."""
    (msg,) = decode_message_exts(_GOLDEN, "broker-a")
    assert [msg] == _reference(_GOLDEN, "broker-a")
    assert (msg.topic, msg.body, msg.msg_id, msg.queue_id, msg.queue_offset) == (
        "T",
        b"hi",
        "K",
        2,
        9,
    )
    assert (msg.flag, msg.store_size, msg.commit_log_offset, msg.reconsume_times) == (
        5,
        112,
        1024,
        3,
    )
    assert msg.born_host == ("10.0.0.1", 5000)
    assert msg.store_host == ("127.0.0.1", 10911)
    assert msg.offset_msg_id == "7F00000100002A9F0000000000000400"
    assert (msg.born_timestamp, msg.store_timestamp) == (1700000000000, 1700000000001)
    assert msg.properties == {"TAGS": "a", "UNIQ_KEY": "K"}


def test_decode_message_exts_filters_tags_and_adds_offsets() -> None:
    """1. Decode two records (TAGS a, TAGS b) keeping only tag b, adding MIN/MAX_OFFSET.
    Expected: only the b record, carrying both extra properties; its map is its own."""
    a = encode_record(MessageRecord(topic="T", queue_id=0, body=b"1", properties="TAGS\x01a\x02"))
    b = encode_record(MessageRecord(topic="T", queue_id=0, body=b"2", properties="TAGS\x01b\x02"))
    extra = {MessageConst.MIN_OFFSET: "0", MessageConst.MAX_OFFSET: "7"}
    msgs = decode_message_exts(a + b + b, "bk", tags=frozenset({"b"}), extra_properties=extra)
    assert [m.body for m in msgs] == [b"2", b"2"]
    assert msgs[0].properties == {"TAGS": "b", "MIN_OFFSET": "0", "MAX_OFFSET": "7"}
    assert msgs[0].properties is not msgs[1].properties


@pytest.mark.parametrize(
    ("cut", "why"),
    [
        (lambda rec: rec[:-1], "truncated"),
        (lambda rec: rec[:4] + b"\x00\x00\x00\x00" + rec[8:], "bad magic"),
        (lambda rec: struct.pack(">i", len(rec) + 1) + rec[4:] + b"\x00", "size too large"),
        (lambda rec: rec[:-10] + b"\xff" + rec[-9:], "bad utf-8"),
    ],
)
def test_decode_message_exts_rejects_corrupt_records(cut: object, why: str) -> None:
    """1. Corrupt the golden record (truncate, magic, TOTALSIZE, UTF-8). 2. Decode with both.
    Expected: both raise MessageCodecError."""
    assert callable(cut)
    bad = cut(_GOLDEN)
    with pytest.raises(MessageCodecError):
        decode_message_exts(bad, "b")
    with pytest.raises(MessageCodecError):
        _reference(bad, "b")


_hosts = st.one_of(
    st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535)),
    st.tuples(st.ip_addresses(v=6).map(lambda a: a.exploded), st.integers(0, 65535)),
)
_names = st.text(st.characters(blacklist_characters="\x01\x02", codec="utf-8"), max_size=8)
_int31 = st.integers(0, 2**31 - 1)


@st.composite
def _records(draw: st.DrawFn) -> tuple[MessageRecord, bytes]:
    """A stored record (v1/v2 topic, IPv4/IPv6 hosts, maybe zlib) and its uncompressed body."""
    topic = draw(st.text(st.characters(codec="utf-8"), min_size=1, max_size=140))
    payload = draw(st.binary(max_size=64))
    zipped = draw(st.booleans())
    rec = MessageRecord(
        topic=topic,
        queue_id=draw(_int31),
        body=zlib.compress(payload) if zipped else payload,
        flag=draw(_int31),
        queue_offset=draw(_int31),
        physical_offset=draw(st.integers(0, 2**62)),
        sys_flag=1 if zipped else 0,
        born_host=draw(_hosts),
        store_host=draw(_hosts),
        reconsume_times=draw(_int31),
        properties=encode_properties(draw(st.dictionaries(_names, _names, max_size=4))),
        magic=choose_magic(topic.encode()),
    )
    return rec, payload


@settings(max_examples=150, deadline=None)
@given(st.lists(_records(), min_size=1, max_size=4))
def test_decode_message_exts_round_trip_matches_reference(
    recs: list[tuple[MessageRecord, bytes]],
) -> None:
    """1. Encode random records (v1/v2 topics, IPv4/IPv6 hosts, zlib bodies, any properties)
    with the store's encoder, back to back. 2. Decode with both decoders.
    Expected: equal MessageExt lists; bodies, topics and offsets are the ones encoded."""
    body = b"".join(encode_record(rec) for rec, _ in recs)
    got = decode_message_exts(body, "bk")
    assert got == _reference(body, "bk")
    assert [(m.topic, m.body, m.queue_offset, m.commit_log_offset) for m in got] == [
        (rec.topic, payload, rec.queue_offset, rec.physical_offset) for rec, payload in recs
    ]


def test_decode_message_exts_long_topic_is_v2() -> None:
    """1. Encode a 200-byte topic as v2. Expected: it decodes, same as the reference."""
    rec = encode_record(MessageRecord(topic="t" * 200, queue_id=1, body=b"", magic=MAGIC_V2))
    assert decode_message_exts(rec, "b") == _reference(rec, "b")
    assert decode_message_exts(rec, "b")[0].topic == "t" * 200


# Segments as they come, malformed ones included: names that end in or contain a wanted name,
# empty names and values, duplicates, a separator inside a value.
_segment = st.one_of(
    st.tuples(st.sampled_from(["UNIQ_KEY", "TAGS", "XUNIQ_KEY", "UNIQ_KEYS", ""]), _names).map(
        lambda kv: f"{kv[0]}\x01{kv[1]}"
    ),
    st.sampled_from(["UNIQ_KEY\x01a\x01b", "\x01UNIQ_KEY\x01c", "UNIQ_KEY", "", "TAGS\x01"]),
    _names,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_segment, max_size=6), st.booleans(), st.sampled_from(["UNIQ_KEY", "TAGS"]))
def test_property_value_is_decode_properties_get(
    segments: list[str], trailing: bool, name: str
) -> None:
    """1. Join random (also malformed) segments into a properties text. 2. Look up UNIQ_KEY or
    TAGS in place. Expected: what the decoded map holds (last non-empty duplicate wins)."""
    text = "\x02".join(segments) + ("\x02" if trailing else "")
    assert property_value(text, name) == decode_properties(text).get(name)


def test_pulled_message_properties_are_decoded_on_first_use() -> None:
    """1. Decode the golden record with MIN/MAX_OFFSET extras. 2. Read ids, then properties,
    then copy it onto its original topic (a retry-topic message, restore_topic).
    Expected: the id comes from UNIQ_KEY before any map is built; the map has the record's
    properties plus the extras and equals the reference decoder's; the restored copy keeps
    every other field; a message of another topic is returned as is."""
    extra = {MessageConst.MIN_OFFSET: "0", MessageConst.MAX_OFFSET: "9"}
    (msg,) = decode_message_exts(_GOLDEN, "broker-a", extra_properties=extra)
    assert msg._properties is None  # not built by decoding
    assert msg.msg_id == "K"
    assert msg._properties is None
    assert msg.tags == "a"
    assert msg.properties == {"TAGS": "a", "UNIQ_KEY": "K", **extra}
    (ref,) = _reference(_GOLDEN, "broker-a")
    ref.properties.update(extra)
    assert msg == ref
    assert "MessageExt(topic='T'" in repr(msg)
    retried = msg.replace(topic="%RETRY%g", properties={**msg.properties, "RETRY_TOPIC": "T0"})
    restored = restore_topic(retried, "%RETRY%g")
    assert restored.topic == "T0"
    assert restored.replace(topic="%RETRY%g") == retried
    assert restore_topic(msg, "%RETRY%g") is msg
