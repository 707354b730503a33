"""The client's MessageDecoder parts: properties, batch body, offset ids, UNIQ_KEY, queue choice."""

from __future__ import annotations

import re
import struct

from rocketpy.client.message import decode_message_exts
from rocketpy.client.rebalance import allocate_averagely
from rocketpy.client.route_cache import TopicPublishInfo
from rocketpy.common.javahash import java_string_hash
from rocketpy.common.message.batch_body import decode_batch_body, encode_batch_body
from rocketpy.common.message.client_id import UniqIdGenerator
from rocketpy.common.message.decoder import decode_offset_msg_id, encode_offset_msg_id
from rocketpy.common.message.properties import decode_properties, encode_properties
from rocketpy.common.message.record import MAGIC_V2, MessageRecord, encode_record
from rocketpy.remoting.protocol.body.broker import MessageQueue


def test_properties_round_trip_and_malformed_segments() -> None:
    """1. Encode two properties. 2. Decode them plus malformed segments.
    Expected: name\\x01value\\x02 per entry; short, key-less and value-less segments dropped; the
    last duplicate wins."""
    text = encode_properties({"TAGS": "a", "KEYS": "k1 k2", "none": None})
    assert text == "TAGS\x01a\x02KEYS\x01k1 k2\x02"
    assert decode_properties(text + "x\x02\x01ab\x02K\x01\x02TAGS\x01b\x02") == {
        "TAGS": "b",
        "KEYS": "k1 k2",
    }


def test_java_string_hash_matches_java() -> None:
    """Expected: String.hashCode values computed by Java ("TagA" 2598919, "中" 20013, overflow)."""
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("中") == 20013
    assert java_string_hash("polygenelubricants") == -2147483648


def test_batch_body_is_what_the_broker_splits() -> None:
    """1. Encode a two-message batch. 2. Split it with the broker's decoder.
    Expected: flags, bodies and properties come back in order; the first item is 20 + body + 2 +
    properties bytes long."""
    body = encode_batch_body([(1, b"ab", "K\x01v\x02"), (0, b"", "")])
    assert struct.unpack_from(">i", body)[0] == 20 + 2 + 2 + 4
    items = decode_batch_body(body)
    assert items == [
        (1, b"ab", "K\x01v\x02"),
        (0, b"", ""),
    ]


def test_offset_msg_id_round_trip() -> None:
    """Expected: 32 uppercase hex chars for IPv4 (address, port, offset) and back."""
    msg_id = encode_offset_msg_id(("127.0.0.1", 10911), 123456)
    assert msg_id == "7F00000100002A9F000000000001E240"
    assert decode_offset_msg_id(msg_id) == (("127.0.0.1", 10911), 123456)


def test_unique_ids_are_distinct_and_shaped_like_java() -> None:
    """Expected: 32 uppercase hex chars starting with the IP and pid; 1000 ids all distinct."""
    gen = UniqIdGenerator("10.0.0.5", 0x1234, 7)
    ids = [gen.create(1_700_000_000_000) for _ in range(1000)]
    assert all(re.fullmatch(r"0A0000051234[0-9A-F]{20}", i) for i in ids)
    assert len(set(ids)) == 1000


def test_pulled_records_decode_into_message_ext() -> None:
    """1. Encode two stored records with the store's encoder (v1 and a long-topic v2). 2. Decode
    the concatenation as a pull body.
    Expected: every field comes back; msg_id is the UNIQ_KEY when present, else the offset id."""
    common = {
        "queue_id": 3,
        "flag": 0,
        "queue_offset": 7,
        "sys_flag": 0,
        "born_timestamp": 1,
        "born_host": ("127.0.0.1", 5000),
        "store_timestamp": 2,
        "store_host": ("127.0.0.1", 10911),
        "reconsume_times": 1,
        "prepared_transaction_offset": 0,
    }
    a = MessageRecord(
        topic="T", body=b"x", physical_offset=0, properties="UNIQ_KEY\x01U1\x02", **common
    )
    first = encode_record(a)
    b = MessageRecord(
        topic="%RETRY%" + "g" * 130,
        body=b"yz",
        physical_offset=len(first),
        properties="",
        magic=MAGIC_V2,
        **common,
    )
    msgs = decode_message_exts(first + encode_record(b), "broker-a")
    assert [m.body for m in msgs] == [b"x", b"yz"]
    assert msgs[0].msg_id == "U1"
    assert (
        msgs[1].msg_id
        == msgs[1].offset_msg_id
        == encode_offset_msg_id(("127.0.0.1", 10911), len(first))
    )
    assert msgs[1].topic == b.topic
    assert (msgs[0].queue_id, msgs[0].queue_offset, msgs[0].reconsume_times) == (3, 7, 1)
    assert msgs[0].born_host == ("127.0.0.1", 5000)
    assert msgs[0].message_queue == MessageQueue(topic="T", broker_name="broker-a", queue_id=3)


def test_publish_info_round_robin_avoids_last_broker() -> None:
    """1. Two brokers with 2 queues each. 2. Select 4 times, then select avoiding broker a.
    Expected: 4 selections cover all 4 queues; a retry after broker a picks broker b."""
    queues = tuple(
        MessageQueue(topic="T", broker_name=b, queue_id=i) for b in ("a", "b") for i in range(2)
    )
    info = TopicPublishInfo("T", queues, {"a": "1:1", "b": "2:2"})
    assert {info.select() for _ in range(4)} == set(queues)
    assert all(info.select("a").broker_name == "b" for _ in range(4))


def test_allocate_averagely_matches_java_blocks() -> None:
    """1. 8 queues over 3 sorted client ids; 2 queues over 3 clients; an unknown client.
    Expected: AllocateMessageQueueAveragely's blocks: [0,1,2], [3,4,5], [6,7]; with fewer queues
    than clients the last client gets nothing; an unknown client gets nothing."""
    mqs = [MessageQueue(topic="T", broker_name="b", queue_id=i) for i in range(8)]
    cids = ["c1", "c2", "c3"]
    got = [[mq.queue_id for mq in allocate_averagely(mqs, cids, c)] for c in cids]
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert [len(allocate_averagely(mqs[:2], cids, c)) for c in cids] == [1, 1, 0]
    assert allocate_averagely(mqs, cids, "other") == []
