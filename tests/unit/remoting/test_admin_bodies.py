"""The admin reply decoders read back what the broker's encoders write (fastjson's
object-keyed maps), and reject malformed bodies with CodecError."""

from __future__ import annotations

import pytest

from rocketpy.common.errors import CodecError
from rocketpy.remoting.protocol.body.admin import (
    KeyedPairs,
    decode_consume_stats,
    decode_kv_table,
    decode_reset_offset_body,
    decode_topic_stats,
    loads_keyed,
)
from rocketpy.remoting.protocol.body.broker import (
    ConsumeStats,
    MessageQueue,
    OffsetWrapper,
    TopicOffset,
    encode_consume_stats,
    encode_kv_table,
    encode_reset_offset_body,
    encode_topic_stats,
)

Q0 = MessageQueue(topic="T", broker_name="b", queue_id=0)
Q1 = MessageQueue(topic="T", broker_name="b", queue_id=1)


def test_admin_bodies_consume_stats_round_trip() -> None:
    """1. Encode a ConsumeStats of two queues. 2. Decode it.
    Expected: the same offsets per queue and the TPS as a float."""
    table = {
        Q0: OffsetWrapper(broker_offset=9, consumer_offset=4, pull_offset=5, last_timestamp=7),
        Q1: OffsetWrapper(broker_offset=1, consumer_offset=0, pull_offset=0, last_timestamp=0),
    }
    got = decode_consume_stats(
        encode_consume_stats(ConsumeStats(offset_table=table, consume_tps=3))
    )
    assert got.offset_table == table
    assert got.consume_tps == 3.0


def test_admin_bodies_topic_stats_reset_and_kv_round_trip() -> None:
    """1. Encode a TopicStatsTable, a ResetOffsetBody and a KVTable. 2. Decode them.
    Expected: equal values; an absent topicPutTps reads as 0.0; an empty table is empty."""
    stats = {Q1: TopicOffset(min_offset=0, max_offset=5, last_update_timestamp=12)}
    assert decode_topic_stats(encode_topic_stats(stats)) == (stats, 0.0)
    assert decode_reset_offset_body(encode_reset_offset_body({Q0: 3, Q1: 2})) == {Q0: 3, Q1: 2}
    assert decode_reset_offset_body(b'{"offsetTable":{}}') == {}
    assert decode_kv_table(encode_kv_table({"putTps": "1.0 2.0"})) == {"putTps": "1.0 2.0"}


def test_admin_bodies_loads_keyed_shapes() -> None:
    """1. Parse plain JSON, fastjson integer keys and object keys with nesting.
    Expected: plain objects stay dicts (integer keys as strings); object keys come back as
    KeyedPairs in order."""
    assert loads_keyed('{"a":[1,{"b":null}],"c":true}') == {"a": [1, {"b": None}], "c": True}
    assert loads_keyed("{0:1, 1:2}") == {"0": 1, "1": 2}
    pairs = loads_keyed('{ {"x":1} : {"y":[]} , {"x":2}:3 }')
    assert isinstance(pairs, KeyedPairs)
    assert list(pairs) == [({"x": 1}, {"y": []}), ({"x": 2}, 3)]


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b'{"offsetTable":[1]}', b'{"offsetTable":{{"topic":"T"}:1', b"\xff", b"{} x"],
)
def test_admin_bodies_malformed_raise_codec_error(body: bytes) -> None:
    """A truncated, non-UTF-8, wrongly shaped or trailing-garbage body raises CodecError."""
    with pytest.raises(CodecError):
        decode_reset_offset_body(body)
