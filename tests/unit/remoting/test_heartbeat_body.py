"""HeartbeatData: every client's dialect decodes to the same values (client-flows.md section 3)."""

from __future__ import annotations

import pytest

from rocketpy.common.errors import CodecError
from rocketpy.remoting.protocol.body.heartbeat import (
    ConsumerData,
    HeartbeatData,
    SubscriptionData,
    decode_heartbeat,
    encode_heartbeat,
)

JAVA = (
    b'{"clientID":"10.0.0.5@12345#1","consumerDataSet":[{"consumeFromWhere":'
    b'"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"g1",'
    b'"messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,'
    b'"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,'
    b'"tagsSet":["TagA"],"topic":"T"},{"classFilterMode":false,"codeSet":[],"expressionType":'
    b'"TAG","subString":"*","subVersion":1700000000001,"tagsSet":[],"topic":"%RETRY%g1"}],'
    b'"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"p1"},'
    b'{"groupName":"CLIENT_INNER_PRODUCER"}],"withoutSub":false}'
)

CPP = (
    b'{"clientID":"10.0.0.5@12345#1","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
    b'"groupName":"g1","messageModel":1,"subscriptionDataSet":[{"codeSet":[2598919],'
    b'"subString":"TagA","subVersion":"1700000000000","tagsSet":["TagA"],"topic":"T"},'
    b'{"subString":"*","subVersion":"1700000000001","topic":"%RETRY%g1"}]}],'
    b'"producerDataSet":[{"groupName":"p1"},{"groupName":"CLIENT_INNER_PRODUCER"}]}\n'
)

EXPECTED = HeartbeatData(
    client_id="10.0.0.5@12345#1",
    producer_groups=("p1", "CLIENT_INNER_PRODUCER"),
    consumer_data_set=(
        ConsumerData(
            group_name="g1",
            consume_type="CONSUME_PASSIVELY",
            message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_LAST_OFFSET",
            subscription_data_set=(
                SubscriptionData(
                    topic="T",
                    sub_string="TagA",
                    tags_set=("TagA",),
                    code_set=(2598919,),
                    sub_version=1_700_000_000_000,
                ),
                SubscriptionData(topic="%RETRY%g1", sub_string="*", sub_version=1_700_000_000_001),
            ),
        ),
    ),
)


@pytest.mark.parametrize("body", [JAVA, CPP], ids=["java", "cpp"])
def test_heartbeat_dialects_decode_alike(body: bytes) -> None:
    """1. Decode the Java and the C++ form of the same heartbeat.
    Expected: identical values (enum ordinals -> names, string subVersion -> int, absent
    expressionType -> TAG, absent sets -> empty)."""
    assert decode_heartbeat(body) == EXPECTED


def test_heartbeat_encode_is_java_bytes() -> None:
    """Our encoding of the decoded Java heartbeat is byte-identical to Java's."""
    assert encode_heartbeat(EXPECTED) == JAVA


def test_heartbeat_ali_ons_empty_sets_and_producer_only() -> None:
    """ali-ons sends both data sets even when empty; a producer-only heartbeat decodes."""
    data = decode_heartbeat(
        b'{"clientID":"c","producerDataSet":[{"groupName":"p"}],"consumerDataSet":[]}'
    )
    assert data == HeartbeatData(client_id="c", producer_groups=("p",))


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b'{"clientID":"c","consumerDataSet":[{"consumeType":"NOPE"}]}'],
)
def test_heartbeat_garbage_raises_codec_error(body: bytes) -> None:
    """Empty, non-JSON or unknown enum values raise CodecError (answered SYSTEM_ERROR)."""
    with pytest.raises(CodecError):
        decode_heartbeat(body)
