"""POP's pure formats: ExtraInfo, the offset-info headers, ck/ack/bAck JSON, the batch-ack body
and its bit set, and the POP headers' extFields (proxy.md sections 3.1-3.4)."""

from __future__ import annotations

import base64

import pytest

from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import Bean, dumps
from rocketpy.remoting.protocol import pop as codec
from rocketpy.remoting.protocol.headers.base import MissingHeaderField, from_ext, to_ext
from rocketpy.remoting.protocol.headers.pop import (
    AckMessageRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)

SPEC_HANDLE = "0 1764230400123 30000 3 0 broker-a 2 17 8812"


def test_extra_info_decodes_the_spec_example_and_encodes_it_back() -> None:
    extra = codec.decode_extra_info(SPEC_HANDLE)
    assert extra == codec.ExtraInfo(
        ck_queue_offset=0, pop_time=1764230400123, invisible_time=30000, revive_qid=3,
        topic_type="0", broker_name="broker-a", queue_id=2, queue_offset=17,
        commit_log_offset=8812,
    )  # fmt: skip
    assert extra.encode() == SPEC_HANDLE
    eight = SPEC_HANDLE.rsplit(" ", 1)[0]
    assert codec.decode_extra_info(eight).commit_log_offset == -1
    assert codec.decode_extra_info(eight).encode() == eight


def test_extra_info_expiry_is_pop_time_plus_invisible_time() -> None:
    extra = codec.decode_extra_info(SPEC_HANDLE)
    assert not extra.expired(1764230400123 + 29_999)
    assert extra.expired(1764230400123 + 30_000)


@pytest.mark.parametrize("bad", ["", "1 2 3 4 0 b 1", "x 2 3 4 0 b 1 2", "1 2 3 4 0 b 1 2 nine"])
def test_extra_info_refuses_short_or_non_numeric_text(bad: str) -> None:
    with pytest.raises(CodecError):
        codec.decode_extra_info(bad)


def test_offset_infos_are_joined_and_parsed_as_upstream() -> None:
    start: list[str] = []
    msgs: list[str] = []
    orders: list[str] = []
    codec.build_start_offset_info(start, "T", 2, 5)
    codec.build_start_offset_info(start, "%RETRY%G_T", 0, 3)
    codec.build_msg_offset_info(msgs, "T", 2, [5, 6, 9])
    codec.build_msg_offset_info(msgs, "%RETRY%G_T", 0, [3])
    codec.build_order_count_info(orders, "T", 2, 5, 1)
    assert ";".join(start) == "0 2 5;1 0 3"
    assert ";".join(msgs) == "0 2 5,6,9;1 0 3"
    assert ";".join(orders) == "0 qo2%5 1"
    assert codec.parse_start_offset_info("0 2 5;1 0 3") == {"0@2": 5, "1@0": 3}
    assert codec.parse_msg_offset_info("0 2 5,6,9;1 0 3") == {"0@2": [5, 6, 9], "1@0": [3]}
    assert codec.parse_order_count_info("0 qo2%5 1;0 3 2") == {"0@2@5": 1, "0@3": 2}
    assert codec.parse_start_offset_info("") == {}
    with pytest.raises(CodecError):
        codec.parse_msg_offset_info("0 2")


def test_retry_topic_names_and_topic_types() -> None:
    assert codec.pop_retry_topic("T", "G") == "%RETRY%G_T"
    assert codec.pop_retry_topic("T", "G", v2=True) == "%RETRY%G+T"
    assert codec.topic_type("T") == codec.NORMAL_TOPIC
    assert codec.topic_type("%RETRY%G_T") == codec.RETRY_TOPIC
    assert codec.topic_type("%RETRY%G+T") == codec.RETRY_TOPIC_V2
    assert codec.real_topic("1", "T", "G") == "%RETRY%G_T"
    assert codec.real_topic("0", "T", "G") == "T"
    assert codec.revive_topic("DefaultCluster") == "rmq_sys_REVIVE_LOG_DefaultCluster"


def _ck() -> codec.PopCheckPoint:
    return codec.PopCheckPoint(
        start_offset=5, pop_time=100, invisible_time=30000, num=2, queue_id=1, topic="T",
        cid="G", queue_offset_diff=[0, 3], broker_name="broker-a",
    )  # fmt: skip


def test_checkpoint_json_is_fastjson_sorted_and_round_trips() -> None:
    ck = _ck()
    raw = ck.encode()
    assert raw == (
        b'{"bm":0,"bn":"broker-a","c":"G","d":[0,3],"it":30000,"n":2,"pt":100,"q":1,'
        b'"ro":0,"so":5,"t":"T"}'
    )
    assert codec.decode_checkpoint(raw) == ck
    assert ck.unique_id() == "T@1@5@G@100@broker-a@ck"
    assert [ck.offset_at(0), ck.offset_at(1)] == [5, 8]
    assert [ck.index_of(5), ck.index_of(8), ck.index_of(6), ck.index_of(4)] == [0, 1, -1, -1]
    assert ck.revive_time == 30100


def test_ack_and_batch_ack_json() -> None:
    ack = codec.AckMsg(
        ack_offset=8, start_offset=5, consumer_group="G", topic="T", queue_id=1, pop_time=100,
        broker_name="broker-a",
    )  # fmt: skip
    assert ack.encode() == b'{"ao":8,"bn":"broker-a","c":"G","pt":100,"q":1,"so":5,"t":"T"}'
    assert ack.unique_id() == "T@1@8@G@100@broker-a@ack"
    assert codec.decode_ack(ack.encode()) == ack
    batch = codec.BatchAckMsg(
        ack_offset=-1, start_offset=5, consumer_group="G", topic="T", queue_id=1, pop_time=100,
        ack_offset_list=[5, 8],
    )  # fmt: skip
    assert batch.encode() == b'{"ao":-1,"aol":[5,8],"c":"G","pt":100,"q":1,"so":5,"t":"T"}'
    decoded = codec.decode_ack(batch.encode())
    assert isinstance(decoded, codec.BatchAckMsg)
    assert decoded.ack_offset_list == [5, 8]
    with pytest.raises(CodecError):
        codec.decode_ack(b'{"ao":1}')
    with pytest.raises(CodecError):
        codec.decode_checkpoint(b"[1]")


def test_bit_set_is_java_to_byte_array_in_base64() -> None:
    # BitSet{0,3,9}.toByteArray() == [0x09, 0x02]
    assert codec.encode_bit_set({0, 3, 9}) == base64.b64encode(b"\x09\x02").decode()
    assert codec.decode_bit_set("CQI=") == frozenset({0, 3, 9})
    assert codec.encode_bit_set(set()) == ""
    with pytest.raises(CodecError):
        codec.decode_bit_set("@@@")


def test_batch_ack_body_round_trips_and_accepts_long_names() -> None:
    entry = codec.BatchAck(
        consumer_group="G", topic="T", retry="0", start_offset=10, queue_id=1,
        revive_queue_id=3, pop_time=100, invisible_time=30000, bit_set=frozenset({0, 2}),
    )  # fmt: skip
    body = codec.encode_batch_ack_body("broker-a", [entry])
    assert body == (
        b'{"acks":[{"b":"BQ==","c":"G","it":30000,"pt":100,"q":1,"r":"0","rq":3,"so":10,'
        b'"t":"T"}],"brokerName":"broker-a"}'
    )
    assert codec.decode_batch_ack_body(body) == ("broker-a", [entry])
    assert entry.offsets == [10, 12]
    long = (
        b'{"acks":[{"consumerGroup":"G","topic":"T","retry":"0","startOffset":10,"queueId":1,'
        b'"reviveQueueId":3,"popTime":100,"invisibleTime":30000,"bitSet":"BQ=="}]}'
    )
    assert codec.decode_batch_ack_body(long) == (None, [entry])
    with pytest.raises(CodecError):
        codec.decode_batch_ack_body(b'{"acks":[{"c":"G"}]}')


def test_pop_headers_use_upstream_field_names() -> None:
    ext = {"consumerGroup": "G", "topic": "T", "queueId": "-1", "maxMsgNums": "32",
           "invisibleTime": "60000", "pollTime": "20000", "bornTime": "1", "initMode": "1",
           "order": "true", "attemptId": "a1"}  # fmt: skip
    h = from_ext(PopMessageRequestHeader, ext)
    assert (h.queue_id, h.max_msg_nums, h.order, h.attempt_id) == (-1, 32, True, "a1")
    assert to_ext(h) == ext
    response = PopMessageResponseHeader(
        pop_time=1, invisible_time=2, revive_qid=3, rest_num=4, start_offset_info="0 0 1"
    )
    assert to_ext(response) == {"popTime": "1", "invisibleTime": "2", "reviveQid": "3",
                                "restNum": "4", "startOffsetInfo": "0 0 1"}  # fmt: skip
    with pytest.raises(MissingHeaderField):
        from_ext(AckMessageRequestHeader, {"consumerGroup": "G", "topic": "T", "queueId": "0"})


@pytest.mark.parametrize("broker_name", [None, "broker-a", 'b"\\\n\x01\x85é'])
def test_ack_json_is_what_the_generic_bean_writer_writes(broker_name: str | None) -> None:
    """``AckMsg.encode`` builds the text directly; it must stay byte-for-byte fastjson's."""
    fields = dict(
        ack_offset=-1, start_offset=7, consumer_group='G"1\t', topic="%RETRY%G_T\\x", queue_id=3,
        pop_time=1_700_000_000_123, broker_name=broker_name,
    )  # fmt: skip
    bean = Bean(ao=-1, so=7, c='G"1\t', t="%RETRY%G_T\\x", q=3, pt=1_700_000_000_123,
                bn=broker_name)  # fmt: skip
    assert codec.AckMsg(**fields).encode() == dumps(bean).encode()  # type: ignore[arg-type]
    for aol in ([], [7], [7, 9, 1_000_000]):
        batch = codec.BatchAckMsg(**fields, ack_offset_list=aol)  # type: ignore[arg-type]
        assert batch.encode() == dumps(Bean(bean, aol=aol)).encode()
