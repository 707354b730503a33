"""Broker request headers: SEND_MESSAGE_V2's single-letter form, mandatory fields, pull header."""

from __future__ import annotations

import pytest

from rocketpy.common.codes import RequestCode
from rocketpy.common.errors import CodecError
from rocketpy.remoting.protocol.headers.base import MissingHeaderField, from_ext, to_ext
from rocketpy.remoting.protocol.headers.broker import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SendMessageRequestHeader,
    decode_send_header,
    send_header_to_v2,
)

JAVA_V2 = {
    "a": "p1",
    "b": "TopicTest",
    "c": "TBW102",
    "d": "4",
    "e": "2",
    "f": "0",
    "g": "1700000000000",
    "h": "0",
    "i": "UNIQ_KEY\x01AB\x02WAIT\x01true\x02TAGS\x01TagA\x02",
    "j": "0",
    "k": "false",
    "m": "false",
    "n": "broker-a",
}


def test_send_header_v2_decodes_to_v1() -> None:
    """1. A Java SEND_MESSAGE_V2 header (keys a..n). 2. Decode for code 310.
    Expected: the V1 header with each letter in its field; `l` absent -> None."""
    h = decode_send_header(RequestCode.SEND_MESSAGE_V2, JAVA_V2)
    assert h == SendMessageRequestHeader(
        producer_group="p1",
        topic="TopicTest",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=2,
        sys_flag=0,
        born_timestamp=1_700_000_000_000,
        flag=0,
        properties=JAVA_V2["i"],
        reconsume_times=0,
        unit_mode=False,
        batch=False,
        max_reconsume_times=None,
        bname="broker-a",
    )
    assert to_ext(send_header_to_v2(h)) == JAVA_V2


def test_send_header_v1_uses_long_names_for_code_10() -> None:
    """SEND_MESSAGE (10) carries Java field names; a missing mandatory one is named."""
    ext = {
        "producerGroup": "p",
        "topic": "T",
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": "1",
        "flag": "0",
    }
    assert decode_send_header(RequestCode.SEND_MESSAGE, ext).topic == "T"
    del ext["bornTimestamp"]
    with pytest.raises(MissingHeaderField, match="bornTimestamp"):
        decode_send_header(RequestCode.SEND_MESSAGE, ext)
    with pytest.raises(MissingHeaderField, match="<b>"):
        decode_send_header(RequestCode.SEND_MESSAGE_V2, {"a": "p"})


def test_pull_headers_round_trip() -> None:
    """A Java push consumer's pull header decodes; the response header renders every field."""
    ext = {
        "consumerGroup": "g",
        "topic": "T",
        "queueId": "1",
        "queueOffset": "5",
        "maxMsgNums": "32",
        "sysFlag": "3",
        "commitOffset": "4",
        "suspendTimeoutMillis": "15000",
        "subVersion": "1700000000000",
        "expressionType": "TAG",
        "bname": "broker-a",
    }
    h = from_ext(PullMessageRequestHeader, ext)
    assert (h.queue_offset, h.sys_flag, h.subscription) == (5, 3, None)
    resp = PullMessageResponseHeader(
        suggest_which_broker_id=0, next_begin_offset=7, min_offset=0, max_offset=7
    )
    assert to_ext(resp) == {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": "7",
        "minOffset": "0",
        "maxOffset": "7",
    }


def test_send_header_v2_batch_and_max_reconsume_land_in_their_fields() -> None:
    """1. A V2 header with ``l`` (maxReconsumeTimes) = 16 and ``m`` (batch) = true.
    2. Decode for code 320. Expected: batch True and max_reconsume_times 16 -- V1 declares them in
    the other order than the letters, which the V2 -> V1 key map must follow; a bad int names
    its V2 key."""
    h = decode_send_header(RequestCode.SEND_BATCH_MESSAGE, {**JAVA_V2, "l": "16", "m": "true"})
    assert h.batch is True
    assert h.max_reconsume_times == 16
    with pytest.raises(CodecError, match="bad value 'x'") as info:
        decode_send_header(RequestCode.SEND_MESSAGE_V2, {**JAVA_V2, "e": "x"})
    assert info.value.field == "e"
