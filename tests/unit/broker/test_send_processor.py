"""SendMessageProcessor over an in-memory store: checks, auto-create, retry/DLQ, delay, batch."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.message.batch_body import BatchItem, encode_batch_body
from rocketpy.common.message.decoder import decode_offset_msg_id
from rocketpy.common.message.properties import encode_properties
from rocketpy.remoting.protocol.command import RemotingCommand
from tests.unit.broker.support import Harness

MakeHarness = Callable[..., Harness]


def v2(
    topic: str, *, queue_id: int = 0, props: dict[str, str] | None = None, **extra: str
) -> dict[str, str]:
    """A SEND_MESSAGE_V2 header as the Java client builds it."""
    ext = {
        "a": "p1",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": encode_properties(props or {"UNIQ_KEY": "U1", "WAIT": "true", "TAGS": "TagA"}),
        "j": "0",
        "k": "false",
        "m": "false",
    }
    ext.update(extra)
    return ext


def _ok(resp: RemotingCommand | None) -> RemotingCommand:
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp


async def test_send_auto_creates_topic_and_answers_like_java(harness: MakeHarness) -> None:
    """1. SEND_MESSAGE_V2 to unknown TopicTest (defaultTopic TBW102, 4 queues) on queue 2.
    Expected: SUCCESS; the topic exists with 4 queues perm 6; header msgId decodes to the
    store host and the record's commit-log offset; queueOffset 0; transactionId = UNIQ_KEY;
    extFields carry MSG_REGION and TRACE_ON; the stored message got CLUSTER/MSG_REGION/TRACE_ON."""
    h = harness()
    resp = _ok(await h.call(RequestCode.SEND_MESSAGE_V2, v2("TopicTest", queue_id=2), b"hello"))
    created = h.rt.topics.select("TopicTest")
    assert created is not None
    assert (created.write_queue_nums, created.perm) == (4, 6)
    assert resp.ext_fields is not None
    assert resp.ext("MSG_REGION") == "DefaultRegion"
    assert resp.ext("TRACE_ON") == "true"
    assert (resp.ext("queueId"), resp.ext("queueOffset"), resp.ext("transactionId")) == (
        "2",
        "0",
        "U1",
    )
    assert decode_offset_msg_id(resp.ext("msgId") or "") == (("127.0.0.1", 10911), 0)
    stored = h.store.queues[("TopicTest", 2)][0]
    assert stored.body == b"hello"
    assert stored.properties["CLUSTER"] == "c1"
    assert stored.properties["TAGS"] == "TagA"
    assert stored.born_host == ("127.0.0.1", 50000)


@pytest.mark.parametrize(
    ("topic", "config", "code"),
    [
        ("NoSuchTopic", {"autoCreateTopicEnable": False}, ResponseCode.TOPIC_NOT_EXIST),
        ("bad topic!", {}, ResponseCode.INVALID_PARAMETER),
        ("T" * 128, {}, ResponseCode.INVALID_PARAMETER),
        ("SCHEDULE_TOPIC_XXXX", {}, ResponseCode.NO_PERMISSION),
    ],
)
async def test_send_refusals(
    harness: MakeHarness, topic: str, config: dict[str, object], code: int
) -> None:
    """Unknown topic without auto-create, illegal or too long names, and system topics are
    refused with upstream's codes; nothing is stored."""
    h = harness(**config)
    resp = await h.call(RequestCode.SEND_MESSAGE_V2, v2(topic), b"x")
    assert resp is not None
    assert resp.code == code
    assert h.store.next_phy == 0


async def test_send_queue_id_and_size_checks(harness: MakeHarness) -> None:
    """1. Queue id 9 on a 4-queue topic -> INVALID_PARAMETER. 2. A body over maxMessageSize ->
    MESSAGE_ILLEGAL. 3. Queue id -1 -> stored on a random writable queue."""
    h = harness()
    _ok(await h.call(RequestCode.SEND_MESSAGE_V2, v2("T"), b"x"))
    resp = await h.call(RequestCode.SEND_MESSAGE_V2, v2("T", queue_id=9), b"x")
    assert resp is not None
    assert resp.code == ResponseCode.INVALID_PARAMETER
    h.rt.max_message_size = 8
    resp = await h.call(RequestCode.SEND_MESSAGE_V2, v2("T"), b"123456789")
    assert resp is not None
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert "msg body length limit 8B" in (resp.remark or "")
    resp = _ok(await h.call(RequestCode.SEND_MESSAGE_V2, v2("T", queue_id=-1), b"x"))
    assert 0 <= int(resp.ext("queueId") or "") < 4


async def test_send_delay_level_goes_to_schedule_topic(harness: MakeHarness) -> None:
    """A message with DELAY=3 is stored in SCHEDULE_TOPIC_XXXX queue 2 with REAL_TOPIC and
    REAL_QID; DELAY=99 is clamped to the max level 18."""
    h = harness()
    props = {"UNIQ_KEY": "U", "DELAY": "3"}
    _ok(await h.call(RequestCode.SEND_MESSAGE_V2, v2("T", queue_id=1, props=props), b"x"))
    stored = h.store.queues[("SCHEDULE_TOPIC_XXXX", 2)][0]
    assert (stored.properties["REAL_TOPIC"], stored.properties["REAL_QID"]) == ("T", "1")
    props["DELAY"] = "99"
    _ok(await h.call(RequestCode.SEND_MESSAGE_V2, v2("T", props=props), b"x"))
    assert h.store.queues[("SCHEDULE_TOPIC_XXXX", 17)][0].properties["DELAY"] == "18"


async def test_send_retry_topic_to_dlq_after_max_reconsume(harness: MakeHarness) -> None:
    """1. Client-side retry send to %RETRY%g with reconsumeTimes 2, l=2 -> stays in retry.
    2. reconsumeTimes 3 > l=2 -> redirected to %DLQ%g queue 0 with DELAY=-1, DLQ topic created
    with 1 queue."""
    h = harness()
    _ok(await h.call(RequestCode.SEND_MESSAGE_V2, v2("%RETRY%g", j="2", l="2"), b"x"))
    assert ("%RETRY%g", 0) in h.store.queues
    _ok(await h.call(RequestCode.SEND_MESSAGE_V2, v2("%RETRY%g", j="3", l="2"), b"x"))
    dlq = h.store.queues[("%DLQ%g", 0)][0]
    assert dlq.properties["DELAY"] == "-1"
    created = h.rt.topics.select("%DLQ%g")
    assert created is not None
    assert created.write_queue_nums == 1


async def test_send_batch_consecutive_offsets(harness: MakeHarness) -> None:
    """SEND_BATCH_MESSAGE with 3 messages: consecutive queue offsets, comma-joined msgIds, each
    message keeps its own UNIQ_KEY; batches to %RETRY% topics are MESSAGE_ILLEGAL."""
    h = harness()
    entries = [
        BatchItem(
            flag=0,
            body=f"m{i}".encode(),
            properties=encode_properties({"UNIQ_KEY": f"U{i}", "KEYS": f"k{i}"}),
        )
        for i in range(3)
    ]
    resp = _ok(
        await h.call(RequestCode.SEND_BATCH_MESSAGE, v2("B", m="true"), encode_batch_body(entries))
    )
    assert len((resp.ext("msgId") or "").split(",")) == 3
    stored = h.store.queues[("B", 0)]
    assert [m.queue_offset for m in stored] == [0, 1, 2]
    assert [m.properties["UNIQ_KEY"] for m in stored] == ["U0", "U1", "U2"]
    refused = await h.call(
        RequestCode.SEND_BATCH_MESSAGE, v2("%RETRY%g", m="true"), encode_batch_body(entries)
    )
    assert refused is not None
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL


_ADDED = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true", "CLUSTER": "c1"}


async def test_send_batch_mixing_plain_and_decoded_properties(harness: MakeHarness) -> None:
    """1. A batch of three: a plain text, one without UNIQ_KEY, one naming CLUSTER. 2. A batch
    of two plain texts whose bodies hold ``DELAY\x01`` (only the properties count).
    Expected: each record stores its sender's map plus the broker's additions (a UNIQ_KEY made
    for the second, CLUSTER replaced in the third, as per message); the answer's
    transactionId lists the records' UNIQ_KEYs in order."""
    h = harness()
    texts = ["UNIQ_KEY\x01U0\x02", "KEYS\x01k\x02", "UNIQ_KEY\x01U2\x02CLUSTER\x01x\x02"]
    body = encode_batch_body([BatchItem(flag=0, body=b"b", properties=t) for t in texts])
    resp = _ok(await h.call(RequestCode.SEND_BATCH_MESSAGE, v2("B", m="true"), body))
    stored = [m.properties for m in h.store.queues[("B", 0)]]
    made = stored[1]["UNIQ_KEY"]
    assert stored == [
        {"UNIQ_KEY": "U0"} | _ADDED,
        {"KEYS": "k", "UNIQ_KEY": made} | _ADDED,
        {"UNIQ_KEY": "U2"} | _ADDED,
    ]
    assert resp.ext("transactionId") == f"U0,{made},U2"
    plain = [BatchItem(flag=0, body=b"DELAY\x013", properties=f"UNIQ_KEY\x01V{i}") for i in (0, 1)]
    resp = _ok(
        await h.call(RequestCode.SEND_BATCH_MESSAGE, v2("C", m="true"), encode_batch_body(plain))
    )
    assert [m.properties for m in h.store.queues[("C", 0)]] == [
        {"UNIQ_KEY": "V0"} | _ADDED,
        {"UNIQ_KEY": "V1"} | _ADDED,
    ]
    assert resp.ext("transactionId") == "V0,V1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the usual client text: the broker appends its additions to it undecoded
        ("UNIQ_KEY\x01U1\x02WAIT\x01true\x02TAGS\x01A\x02", {"UNIQ_KEY": "U1", "WAIT": "true",
                                                          "TAGS": "A"}),
        # no trailing separator, an empty segment, a duplicate (the later wins)
        ("UNIQ_KEY\x01U1\x02\x02KEYS\x01a\x02KEYS\x01b", {"UNIQ_KEY": "U1", "KEYS": "b"}),
        # values that hold a separator-like needle without being the name
        ("UNIQ_KEY\x01U1\x02XDELAY\x01a\x02", {"UNIQ_KEY": "U1", "XDELAY": "a"}),
        # the sender's CLUSTER / MSG_REGION are replaced (decoding path)
        ("UNIQ_KEY\x01U1\x02CLUSTER\x01x\x02MSG_REGION\x01r\x02", {"UNIQ_KEY": "U1"}),
    ],
)  # fmt: skip
async def test_send_properties_fast_and_decoded_paths_store_one_map(
    harness: MakeHarness, text: str, expected: dict[str, str]
) -> None:
    """1. SEND_MESSAGE_V2 with the given properties text. 2. The same text in a batch of one.
    Expected: the stored record's properties decode to the sender's map plus MSG_REGION,
    TRACE_ON and CLUSTER (the broker's values), whether the text was appended to undecoded or
    decoded; transactionId is the UNIQ_KEY."""
    h = harness()
    ext = v2("T")
    ext["i"] = text
    resp = _ok(await h.call(RequestCode.SEND_MESSAGE_V2, ext, b"x"))
    assert resp.ext("transactionId") == "U1"
    assert h.store.queues[("T", 0)][0].properties == expected | _ADDED
    body = encode_batch_body([BatchItem(flag=0, body=b"y", properties=text)])
    resp = _ok(await h.call(RequestCode.SEND_BATCH_MESSAGE, v2("B", m="true"), body))
    assert resp.ext("transactionId") == "U1"
    stored = h.store.queues[("B", 0)][0].properties
    if "MSG_REGION" in text:  # a batch keeps the sender's region (setdefault), as upstream
        assert stored == expected | _ADDED | {"MSG_REGION": "r"}
    else:
        assert stored == expected | _ADDED


async def test_send_fast_path_follows_an_updated_config(harness: MakeHarness) -> None:
    """1. SEND_MESSAGE_V2 (fast properties path). 2. Swap in a config with traceOn=false and
    another region, as UPDATE_BROKER_CONFIG does. 3. Send again.
    Expected: the first record carries the old TRACE_ON/MSG_REGION, the second the new ones."""
    h = harness()
    _ok(await h.call(RequestCode.SEND_MESSAGE_V2, v2("T"), b"a"))
    h.rt.config = h.rt.config.model_copy(update={"trace_on": False, "region_id": "R2"})
    _ok(await h.call(RequestCode.SEND_MESSAGE_V2, v2("T"), b"b"))
    first, second = (m.properties for m in h.store.queues[("T", 0)])
    assert (first["TRACE_ON"], first["MSG_REGION"]) == ("true", "DefaultRegion")
    assert (second["TRACE_ON"], second["MSG_REGION"]) == ("false", "R2")


async def test_send_back_retry_then_dlq(harness: MakeHarness) -> None:
    """1. Store a message on T. 2. CONSUMER_SEND_MSG_BACK with delayLevel 0.
    3. Send back the retried copy with maxReconsumeTimes 1.
    Expected: first copy goes to SCHEDULE_TOPIC level 3 (3 + reconsumeTimes 0) with REAL_TOPIC
    %RETRY%g, RETRY_TOPIC=T, reconsumeTimes 1 and ORIGIN_MESSAGE_ID; the second (reconsume 1 >=
    max 1) lands in %DLQ%g undelayed. A bad offset -> SYSTEM_ERROR."""
    h = harness()
    _ok(await h.call(RequestCode.SEND_MESSAGE_V2, v2("T"), b"payload"))
    back = {"offset": "0", "group": "g", "delayLevel": "0", "maxReconsumeTimes": "1"}
    _ok(await h.call(RequestCode.CONSUMER_SEND_MSG_BACK, back))
    retry = h.store.queues[("SCHEDULE_TOPIC_XXXX", 2)][0]
    assert retry.properties["REAL_TOPIC"] == "%RETRY%g"
    assert retry.properties["RETRY_TOPIC"] == "T"
    assert retry.reconsume_times == 1
    assert retry.properties["ORIGIN_MESSAGE_ID"] == "7F00000100002A9F0000000000000000"
    _ok(
        await h.call(
            RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "offset": str(retry.commit_log_offset)}
        )
    )
    dlq = h.store.queues[("%DLQ%g", 0)][0]
    assert (dlq.body, dlq.reconsume_times, dlq.properties["DELAY"]) == (b"payload", 2, "0")
    resp = await h.call(RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "offset": "12345"})
    assert resp is not None
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "look message by offset failed, 12345"


async def test_send_missing_header_field_is_system_error(harness: MakeHarness) -> None:
    """P-05: a send without `b` (topic) answers SYSTEM_ERROR naming the field; nothing stored."""
    h = harness()
    ext = v2("T")
    del ext["b"]
    resp = await h.call(RequestCode.SEND_MESSAGE_V2, ext, b"x")
    assert resp is not None
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "<b>" in (resp.remark or "")
    assert h.store.next_phy == 0
