"""The consumer side's pure parts: receipt handles, message conversion, the pop filter, and the
auto-renew table (proxy.md sections 2 and 3.2)."""

from __future__ import annotations

import hashlib

import pytest

from rocketpy.client.message import MessageExt
from rocketpy.proxy.client_settings import DEFAULT_CUSTOMIZED_BACKOFF_MS
from rocketpy.proxy.convert import FilterResult, build_message, filter_message, subscription_tags
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.receipt_handle import (
    changed_handle,
    check_receipt_handle,
    create_handle,
    decode_handle,
    handle_topic,
)
from rocketpy.proxy.renew import RENEW_STEPS_MS, ReceiptHandleManager, TrackedHandle
from rocketpy.proxy.status import ProxyError

POP_TIME = 1_764_230_400_123
EXTRA = f"0 {POP_TIME} 30000 3 0 broker-a 2 17"


def _ext(props: dict[str, str], *, reconsume: int = 0, topic: str = "T") -> MessageExt:
    return MessageExt(
        topic, b"payload", props, "MSGID", "OFFSETID", "broker-a", 2, 17, 8812, 100, 0, 0,
        1_764_230_000_456, ("10.1.2.3", 5555), 1_764_230_000_999, ("127.0.0.1", 10911),
        reconsume, 0,
    )  # fmt: skip


def test_handle_has_the_commit_log_offset_as_ninth_field() -> None:
    handle = create_handle(EXTRA, 8812)
    assert handle == f"{EXTRA} 8812"
    info = decode_handle(handle)
    assert (info.queue_id, info.queue_offset, info.commit_log_offset) == (2, 17, 8812)
    assert decode_handle(EXTRA).commit_log_offset == -1  # 9th field optional


@pytest.mark.parametrize("text", ["", "  ", "1 2 3", "a b c d e f g h", "0 x 30000 3 0 b 2 17"])
def test_garbled_handles_are_invalid(text: str) -> None:
    with pytest.raises(ProxyError) as e:
        decode_handle(text)
    assert e.value.code == pb.Code.INVALID_RECEIPT_HANDLE


def test_expired_when_pop_time_plus_invisible_time_has_passed() -> None:
    info = decode_handle(EXTRA)
    check_receipt_handle(info, POP_TIME + 29_999)
    with pytest.raises(ProxyError) as e:
        check_receipt_handle(info, POP_TIME + 30_000)
    assert (e.value.code, e.value.message) == (
        pb.Code.INVALID_RECEIPT_HANDLE,
        "receipt handle is expired",
    )


def test_changed_handle_starts_its_checkpoint_at_the_message() -> None:
    old = decode_handle(f"5 {POP_TIME} 30000 3 1 broker-a 0 17 8812")
    assert changed_handle(old, POP_TIME + 10, 60_000, 6) == (
        f"17 {POP_TIME + 10} 60000 6 1 broker-a 0 17 8812"
    )
    assert handle_topic(old, "T", "G") == "%RETRY%G_T"
    assert handle_topic(decode_handle(EXTRA), "T", "G") == "T"


def test_build_message_fills_system_and_user_properties() -> None:
    props = {
        "TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "UNIQ1", "index": "7",
        "__SHARDINGKEY": "g1", "TRACE_CONTEXT": "tc", "TIMER_DELIVER_MS": "1764230500000",
        "POP_CK": EXTRA, "PGROUP": "T",
    }  # fmt: skip
    msg = build_message(_ext(props, reconsume=2), "T", f"{EXTRA} 8812", 0)
    sp = msg.system_properties
    assert (msg.topic.name, msg.body, dict(msg.user_properties)) == (
        "T",
        b"payload",
        {"index": "7"},
    )
    assert (sp.tag, list(sp.keys), sp.message_id) == ("TagA", ["k1", "k2"], "UNIQ1")
    assert sp.body_digest.checksum == hashlib.md5(b"payload").hexdigest().upper()  # noqa: S324
    assert sp.message_type == pb.MessageType.DELAY  # the delivery time wins over the group
    assert sp.delivery_timestamp.ToMilliseconds() == 1_764_230_500_000
    assert (sp.message_group, sp.trace_context) == ("g1", "tc")
    assert (sp.born_host, sp.store_host) == ("10.1.2.3:5555", "127.0.0.1:10911")
    assert sp.born_timestamp.ToMilliseconds() == 1_764_230_000_456
    assert sp.store_timestamp.ToMilliseconds() == 1_764_230_000_999
    assert (sp.queue_id, sp.queue_offset, sp.delivery_attempt) == (2, 17, 3)
    assert sp.receipt_handle == f"{EXTRA} 8812"
    assert sp.invisible_duration.ToMilliseconds() == 30_000


@pytest.mark.parametrize(
    ("props", "kind"),
    [
        ({"TRAN_MSG": "true"}, pb.MessageType.TRANSACTION),
        ({"DELAY": "3"}, pb.MessageType.DELAY),
        ({"__SHARDINGKEY": "g"}, pb.MessageType.FIFO),
        ({}, pb.MessageType.NORMAL),
    ],
)
def test_message_type(props: dict[str, str], kind: int) -> None:
    assert build_message(_ext(props), "T", "", 0).system_properties.message_type == kind


def test_message_id_falls_back_to_the_msg_id_and_handle_is_optional() -> None:
    sp = build_message(_ext({}), "T", "", 0).system_properties
    assert sp.message_id == "MSGID"
    assert not sp.HasField("receipt_handle")


def test_filter_by_tag_then_by_attempts() -> None:
    tags = subscription_tags("TagA || TagB")
    assert tags == frozenset({"TagA", "TagB"})
    assert subscription_tags("*") is None
    assert subscription_tags(" ") is None
    assert filter_message(_ext({"TAGS": "TagC"}), tags, 17) == FilterResult.NO_MATCH
    assert filter_message(_ext({"TAGS": "TagA"}, reconsume=16), tags, 17) == FilterResult.MATCH
    assert filter_message(_ext({"TAGS": "TagA"}, reconsume=17), tags, 17) == FilterResult.TO_DLQ
    assert filter_message(_ext({}, reconsume=0), None, 17) == FilterResult.MATCH


def _tracked(handle: str, reconsume: int = 0) -> TrackedHandle:
    return TrackedHandle(
        group="G", topic="T", message_id="M", handle=handle, reconsume_times=reconsume
    )


def test_renew_table_keeps_the_latest_handle() -> None:
    table = ReceiptHandleManager(ahead_ms=10_000, max_ms=3 * 3600 * 1000)
    table.add("c1", _tracked(EXTRA), POP_TIME)
    assert table.latest("c1", "G", "M", "stale") == EXTRA
    assert table.latest("c2", "G", "M", "mine") == "mine"
    assert table.due(POP_TIME + 19_999) == []  # 10.001 s before expiry: not yet
    [task] = table.due(POP_TIME + 20_000)
    assert (task.client_id, task.invisible_ms, task.last) == ("c1", RENEW_STEPS_MS[0], False)
    table.renewed("c1", task.tracked, "NEW HANDLE")
    assert table.latest("c1", "G", "M", "stale") == "NEW HANDLE"
    assert table.remove("c1", "G", "M") is not None
    assert len(table) == 0


def test_renew_steps_grow_and_stop_at_the_maximum_time() -> None:
    table = ReceiptHandleManager(ahead_ms=10_000, max_ms=100_000)
    tracked = _tracked(EXTRA, reconsume=3)
    table.add("c1", tracked, POP_TIME)
    tracked.renew_times = 9
    [task] = table.due(POP_TIME + 25_000)
    assert task.invisible_ms == RENEW_STEPS_MS[-1]
    late = f"0 {POP_TIME + 100_000} 30000 3 0 broker-a 2 17"
    table.renewed("c1", tracked, late)
    [last] = table.due(POP_TIME + 125_000)
    assert (last.last, last.invisible_ms) == (True, DEFAULT_CUSTOMIZED_BACKOFF_MS[3])
    assert len(table) == 0


def test_renew_drops_expired_and_garbled_handles_and_clears_a_client() -> None:
    table = ReceiptHandleManager(ahead_ms=10_000, max_ms=3 * 3600 * 1000)
    table.add("c1", _tracked(EXTRA), POP_TIME)
    assert table.due(POP_TIME + 30_000) == []
    assert len(table) == 0
    table.add("c1", _tracked("garbage"), POP_TIME)
    assert table.due(POP_TIME) == []
    assert len(table) == 0
    table.add("c1", _tracked(EXTRA), POP_TIME)
    table.add("c2", _tracked(EXTRA), POP_TIME)
    assert [t.message_id for t in table.remove_client("c1")] == ["M"]
    assert len(table) == 1
