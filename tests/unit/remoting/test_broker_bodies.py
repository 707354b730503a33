"""Broker JSON bodies: lock requests, consumer lists, Map<MessageQueue, ...> encodings."""

from __future__ import annotations

from rocketpy.remoting.protocol.body.broker import (
    ConsumeStats,
    LockBatchRequestBody,
    MessageQueue,
    OffsetWrapper,
    TopicOffset,
    decode_consumer_list,
    decode_lock_batch_request,
    decode_lock_batch_response,
    encode_consume_stats,
    encode_consumer_list,
    encode_lock_batch_request,
    encode_lock_batch_response,
    encode_reset_offset_body,
    encode_topic_stats,
)

MQ0 = MessageQueue(topic="T", broker_name="broker-a", queue_id=0)
MQ1 = MessageQueue(topic="T", broker_name="broker-a", queue_id=1)


def test_lock_batch_request_java_shape_round_trip() -> None:
    """A Java LockBatchRequestBody decodes; our encoding has fastjson's sorted keys."""
    body = (
        b'{"clientId":"c1","consumerGroup":"g","mqSet":[{"brokerName":"broker-a","queueId":1,'
        b'"topic":"T"},{"brokerName":"broker-a","queueId":0,"topic":"T"}],"onlyThisBroker":false}'
    )
    decoded = decode_lock_batch_request(body)
    assert decoded == LockBatchRequestBody(consumer_group="g", client_id="c1", mq_set=(MQ1, MQ0))
    assert encode_lock_batch_request(decoded) == body


def test_lock_batch_response_and_consumer_list() -> None:
    """lockOKMQSet and consumerIdList round-trip."""
    assert decode_lock_batch_response(encode_lock_batch_response([MQ0])) == (MQ0,)
    assert encode_consumer_list(["a", "b"]) == b'{"consumerIdList":["a","b"]}'
    assert decode_consumer_list(b'{"consumerIdList":["a","b"]}') == ("a", "b")


def test_message_queue_keyed_maps_write_object_keys() -> None:
    """ConsumeStats, TopicStatsTable and ResetOffsetBody key their maps by MessageQueue, which
    fastjson writes as an object key; queues come out in MessageQueue order."""
    stats = ConsumeStats(
        offset_table={
            MQ1: OffsetWrapper(broker_offset=9, consumer_offset=8, pull_offset=9, last_timestamp=5),
            MQ0: OffsetWrapper(broker_offset=3, consumer_offset=3, pull_offset=3, last_timestamp=4),
        }
    )
    assert encode_consume_stats(stats) == (
        b'{"consumeTps":0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
        b'{"brokerOffset":3,"consumerOffset":3,"lastTimestamp":4,"pullOffset":3},'
        b'{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"brokerOffset":9,"consumerOffset":8,'
        b'"lastTimestamp":5,"pullOffset":9}}}'
    )
    assert encode_topic_stats(
        {MQ0: TopicOffset(min_offset=0, max_offset=2, last_update_timestamp=7)}
    ) == (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
        b'{"lastUpdateTimestamp":7,"maxOffset":2,"minOffset":0}}}'
    )
    assert encode_reset_offset_body({MQ0: 5}) == (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:5}}'
    )
