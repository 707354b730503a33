"""SendMessage's validation and message building (``SendMessageActivity``), without I/O."""

from __future__ import annotations

import pytest

from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.route import TopicMessageType
from rocketpy.proxy.send import (
    build_message,
    check_message_type,
    consistent_hash,
    entry_status,
    message_type_of,
    select_by_group,
    validate_topic,
)
from rocketpy.proxy.status import ProxyError

CONFIG = ProxyConfig()
NOW_MS = 1_764_230_400_000


def _msg(**system: object) -> pb.Message:
    props = {
        "message_id": "01ABC",
        "born_timestamp": {"seconds": 1_764_230_400, "nanos": 5_000_000},
    }
    props.update(system)
    return pb.Message(
        topic=pb.Resource(name="T"),
        body=b"hello",
        user_properties={"index": "7"},
        system_properties=pb.SystemProperties(**props),  # type: ignore[arg-type]
    )


def _code(msg: pb.Message, config: ProxyConfig = CONFIG) -> int:
    with pytest.raises(ProxyError) as e:
        build_message(msg, config, "10.0.0.1", NOW_MS)
    return e.value.code


def test_send_properties_as_upstream_builds_them() -> None:
    out = build_message(_msg(tag="TagA", keys=["k1", "k2"]), CONFIG, "10.0.0.1", NOW_MS)
    assert out.properties == {
        "index": "7", "TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "01ABC",
        "RECONSUME_TIME": "0", "PGROUP": "T", "__BORNHOST": "10.0.0.1",
        "BORN_TIMESTAMP": "1764230400005",
    }  # fmt: skip
    assert (out.sys_flag, out.born_timestamp_ms, out.body) == (0, 1_764_230_400_005, b"hello")
    assert message_type_of(out.properties) == TopicMessageType.NORMAL


def test_send_group_transaction_delay_and_gzip() -> None:
    fifo = build_message(_msg(message_group="g1"), CONFIG, "h", NOW_MS)
    assert fifo.properties["__SHARDINGKEY"] == "g1"
    assert message_type_of(fifo.properties) == TopicMessageType.FIFO
    tx = build_message(
        _msg(message_type=pb.MessageType.TRANSACTION, body_encoding=pb.Encoding.GZIP),
        CONFIG, "h", NOW_MS,
    )  # fmt: skip
    assert tx.properties["TRAN_MSG"] == "true"
    assert tx.sys_flag == 0x1 | 0x4
    delay = build_message(
        _msg(delivery_timestamp={"seconds": NOW_MS // 1000 + 10}), CONFIG, "h", NOW_MS
    )
    assert delay.properties["TIMER_DELIVER_MS"] == str(NOW_MS + 10_000)
    assert message_type_of(delay.properties) == TopicMessageType.DELAY


def test_send_refusals_carry_upstream_codes() -> None:
    assert _code(_msg(message_id=" ")) == pb.Code.ILLEGAL_MESSAGE_ID
    assert _code(_msg(tag="a|b")) == pb.Code.ILLEGAL_MESSAGE_TAG
    assert _code(_msg(keys=[" "])) == pb.Code.ILLEGAL_MESSAGE_KEY
    assert _code(_msg(message_group="g" * 64)) == pb.Code.ILLEGAL_MESSAGE_GROUP
    two_days = {"seconds": NOW_MS // 1000 + 2 * 86400}
    assert _code(_msg(delivery_timestamp=two_days)) == pb.Code.ILLEGAL_DELIVERY_TIME
    system_key = _msg()
    system_key.user_properties["UNIQ_KEY"] = "x"
    assert _code(system_key) == pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    empty = _msg()
    empty.body = b""
    assert _code(empty) == pb.Code.MESSAGE_BODY_EMPTY
    big = _msg()
    big.body = b"x" * (CONFIG.max_message_size_bytes + 1)
    assert _code(big) == pb.Code.MESSAGE_BODY_TOO_LARGE
    many = _msg()
    many.user_properties.update({f"k{i}": "v" for i in range(200)})
    assert _code(many) == pb.Code.MESSAGE_PROPERTIES_TOO_LARGE


def test_send_topic_validation() -> None:
    for bad in ("", "a b", "x" * 128, "TBW102", "rmq_sys_anything", "SCHEDULE_TOPIC_XXXX"):
        with pytest.raises(ProxyError) as e:
            validate_topic(bad)
        assert e.value.code == pb.Code.ILLEGAL_TOPIC, bad
    validate_topic("Good_Topic-1%|")


def test_send_message_type_check_is_defaulttopicmessagetypevalidator() -> None:
    check_message_type(TopicMessageType.NORMAL, TopicMessageType.NORMAL)
    check_message_type(TopicMessageType.MIXED, TopicMessageType.FIFO)
    for topic_type, message_type in [
        (TopicMessageType.NORMAL, TopicMessageType.FIFO),
        (TopicMessageType.UNSPECIFIED, TopicMessageType.NORMAL),
        (TopicMessageType.MIXED, TopicMessageType.UNSPECIFIED),
    ]:
        with pytest.raises(ProxyError) as e:
            check_message_type(topic_type, message_type)
        assert e.value.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_consistent_hash_equals_guava() -> None:
    """Guava's own compatibility vectors (HashingTest, linearCongruentialGeneratorCompatibility)."""
    golden100 = [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83]
    assert [consistent_hash(i, 100) for i in range(20)] == golden100
    assert consistent_hash(10863919174838991, 11) == 6
    assert consistent_hash(2016238256797177309, 11) == 3
    assert consistent_hash(1673758223894951030, 11) == 5
    assert consistent_hash(2, 100001) == 80343
    assert consistent_hash(2201, 100001) == 22152
    assert consistent_hash(2202, 100001) == 15018


def test_message_group_picks_a_stable_queue() -> None:
    queues = list(range(8))
    picks = {select_by_group(queues, f"group-{i}") for i in range(200)}
    assert picks == set(queues)  # spread over every queue
    assert select_by_group(queues, "g1") == select_by_group(queues, "g1")


def test_entry_status_per_send_status() -> None:
    assert entry_status("SEND_OK").code == pb.Code.OK
    assert entry_status("FLUSH_DISK_TIMEOUT").code == pb.Code.MASTER_PERSISTENCE_TIMEOUT
    assert entry_status("FLUSH_SLAVE_TIMEOUT").code == pb.Code.SLAVE_PERSISTENCE_TIMEOUT
    assert entry_status("SLAVE_NOT_AVAILABLE").code == pb.Code.HA_NOT_AVAILABLE
    assert entry_status("WHAT").code == pb.Code.INTERNAL_SERVER_ERROR
