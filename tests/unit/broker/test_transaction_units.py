"""Transactional messages over the in-memory store and a manual clock: the half-message
redirect, END_TRANSACTION, the check scan's rounds, the listener's request, the pure builders."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rocketpy.broker.client_manager import ClientChannelInfo
from rocketpy.broker.processors.end_transaction import EndTransactionProcessor
from rocketpy.broker.store_api import StoredMessage
from rocketpy.broker.transaction import util
from rocketpy.broker.transaction.check_service import TransactionalMessageCheckService
from rocketpy.broker.transaction.service import TransactionalMessageService, _calculate_op_offset
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.decoder import decode_record
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.transaction import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from tests.unit.broker.support import FakeChannel, Harness
from tests.unit.broker.test_send_processor import v2

MakeHarness = Callable[..., Harness]
HALF = util.HALF_TOPIC
OP = util.OP_TOPIC


def half_props(uniq: str = "U1", group: str = "p1") -> dict[str, str]:
    return {"UNIQ_KEY": uniq, "WAIT": "true", "TAGS": "T", "TRAN_MSG": "true", "PGROUP": group}


async def send_half(h: Harness, topic: str = "TxnT", uniq: str = "U1") -> StoredMessage:
    resp = await h.call(
        RequestCode.SEND_MESSAGE_V2, v2(topic, queue_id=2, props=half_props(uniq), f="4"), b"b"
    )
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return h.store.queues[(HALF, 0)][int(resp.ext("queueOffset") or -1)]


def wire_txn(h: Harness) -> TransactionalMessageService:
    """The service over the harness store, END_TRANSACTION registered."""
    svc = TransactionalMessageService(h.rt, put=h.store.put_message)
    h.handlers.update(EndTransactionProcessor(h.rt, svc, h.send.route.apply_delay).handlers())
    return svc


def end_ext(
    half: StoredMessage, kind: int, *, group: str = "p1", check: bool = False
) -> dict[str, str]:
    return dict(
        to_ext(
            EndTransactionRequestHeader(
                producer_group=group,
                tran_state_table_offset=half.queue_offset,
                commit_log_offset=half.commit_log_offset,
                commit_or_rollback=kind,
                from_transaction_check=check,
                msg_id=half.properties["UNIQ_KEY"],
            )
        )
    )


async def test_half_message_goes_to_half_topic_with_real_queue(harness: MakeHarness) -> None:
    """1. SEND_MESSAGE_V2 with TRAN_MSG=true, PGROUP and the prepared sys flag to TxnT queue 2.
    Expected: SUCCESS; stored in RMQ_SYS_TRANS_HALF_TOPIC queue 0 with REAL_TOPIC=TxnT,
    REAL_QID=2, __transactionId__ = UNIQ_KEY and the transaction type reset; TxnT stays empty."""
    h = harness()
    half = await send_half(h)
    assert half.sys_flag == 0
    assert half.properties[MessageConst.REAL_TOPIC] == "TxnT"
    assert half.properties[MessageConst.REAL_QID] == "2"
    assert half.properties[util.TRANSACTION_ID] == "U1"
    assert ("TxnT", 2) not in h.store.queues


async def test_reject_transaction_message_refuses_half(harness: MakeHarness) -> None:
    """1. rejectTransactionMessage=true. 2. Send a half message.
    Expected: NO_PERMISSION "sending transaction message is forbidden"; nothing stored."""
    h = harness(rejectTransactionMessage=True)
    resp = await h.call(RequestCode.SEND_MESSAGE_V2, v2("TxnT", props=half_props(), f="4"), b"b")
    assert resp is not None
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "sending transaction message is forbidden" in (resp.remark or "")
    assert (HALF, 0) not in h.store.queues


async def test_end_transaction_commit_rollback_and_refusals(harness: MakeHarness) -> None:
    """1. Two half messages. 2. END_TRANSACTION: not-type (no answer), wrong group, commit of
    the first twice, rollback of the second. 3. A slave's answer.
    Expected: no response for not-type; SYSTEM_ERROR for the wrong group; the commit stores the
    real message once (commit type, cleaned properties, WAIT=false) and one op message per
    ended half (tag d, body "<offset>,"); the rollback stores only its op; a slave answers
    SLAVE_NOT_AVAILABLE."""
    h = harness()
    wire_txn(h)
    first = await send_half(h, uniq="U1")
    second = await send_half(h, uniq="U2")
    assert await h.call(RequestCode.END_TRANSACTION, end_ext(first, 0)) is None
    wrong = await h.call(RequestCode.END_TRANSACTION, end_ext(first, 8, group="other"))
    assert wrong is not None
    assert (wrong.code, wrong.remark) == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")
    for _ in range(2):
        ok = await h.call(RequestCode.END_TRANSACTION, end_ext(first, 8))
        assert ok is not None
        assert ok.code == ResponseCode.SUCCESS
    rolled = await h.call(RequestCode.END_TRANSACTION, end_ext(second, 12))
    assert rolled is not None
    assert rolled.code == ResponseCode.SUCCESS
    real = h.store.queues[("TxnT", 2)]
    assert [m.properties["UNIQ_KEY"] for m in real] == ["U1"]
    assert real[0].sys_flag & 0xC == 0x8
    for gone in (MessageConst.REAL_TOPIC, MessageConst.REAL_QID, MessageConst.TRAN_MSG):
        assert gone not in real[0].properties
    assert real[0].properties[MessageConst.PGROUP] == "p1"
    ops = h.store.queues[(OP, 0)]
    assert [op.body for op in ops] == [b"0,", b"0,", b"1,"]
    assert {op.properties["TAGS"] for op in ops} == {"d"}
    h.rt.is_slave = True
    slave = await h.call(RequestCode.END_TRANSACTION, end_ext(second, 8))
    assert slave is not None
    assert slave.code == ResponseCode.SLAVE_NOT_AVAILABLE


async def test_check_rounds_count_then_discard_and_skip_ended(harness: MakeHarness) -> None:
    """1. Half messages A (never ended) and B (rolled back). 2. Check rounds with
    transactionTimeOut 6 s and transactionCheckMax 2: one at once, then each 7 s later.
    Expected: nothing while A is young; then A is checked with TRANSACTION_CHECK_TIMES 1, 2
    (each a put-back copy at the end of the half queue), then discarded to
    TRANS_CHECK_MAX_TIME_TOPIC; B is never checked; progress lands in CID_RMQ_SYS_TRANS."""
    h = harness()
    svc = wire_txn(h)
    a = await send_half(h, uniq="A")
    b = await send_half(h, uniq="B")
    await h.call(RequestCode.END_TRANSACTION, end_ext(b, 12))
    checked: list[StoredMessage] = []
    discarded: list[StoredMessage] = []

    async def on_check(m: StoredMessage) -> None:
        checked.append(m)

    async def on_discard(m: StoredMessage) -> None:
        discarded.append(m)
        await svc.put(util.discard_message(m))

    assert await svc.check(6000, 2, on_check, on_discard) == 0
    for _ in range(3):
        h.clock.advance(7000)
        await svc.check(6000, 2, on_check, on_discard)
    assert [m.properties["UNIQ_KEY"] for m in checked] == ["A", "A"]
    assert [m.properties[MessageConst.TRANSACTION_CHECK_TIMES] for m in checked] == ["1", "2"]
    assert checked[0].queue_offset > b.queue_offset
    assert [m.properties["UNIQ_KEY"] for m in discarded] == ["A"]
    assert h.store.queues[(util.CHECK_MAX_TIME_TOPIC, 0)][0].body == a.body
    half_progress = h.rt.offsets.query_offset(util.CID_SYS_RMQ_TRANS, HALF, 0)
    assert half_progress == len(h.store.queues[(HALF, 0)])
    assert h.rt.offsets.query_offset(util.CID_SYS_RMQ_TRANS, OP, 0) == 1


async def test_listener_sends_check_to_a_live_producer_channel(harness: MakeHarness) -> None:
    """1. A half message; a producer of group p1 on a closed and on a live channel.
    2. resolve_half of its stored copy.
    Expected: one oneway CHECK_TRANSACTION_STATE on the live channel: header offsets of the
    copy, msgId/transactionId = UNIQ_KEY, bname; the body is the message under its real topic
    and queue."""
    h = harness()
    svc = wire_txn(h)
    half = await send_half(h)
    dead, live = FakeChannel("127.0.0.1:1"), FakeChannel("127.0.0.1:2")
    dead.close()
    for ch in (dead, live):
        h.rt.producers.register_producer(
            "p1", ClientChannelInfo(channel=ch, client_id=ch.peer, language=0, version=0)
        )
    await TransactionalMessageCheckService(h.rt, svc).resolve_half(half)
    assert dead.sent == []
    (request,) = live.sent
    assert request.code == RequestCode.CHECK_TRANSACTION_STATE
    assert request.is_oneway
    header = from_ext(CheckTransactionStateRequestHeader, request.ext_fields)
    assert (header.commit_log_offset, header.tran_state_table_offset) == (
        half.commit_log_offset,
        half.queue_offset,
    )
    assert (header.msg_id, header.transaction_id, header.bname) == ("U1", "U1", "broker-a")
    record = decode_record(request.body or b"")
    assert (record.topic, record.queue_id, record.body) == ("TxnT", 2, b"b")


@pytest.mark.parametrize(
    ("props", "check_max", "expected"),
    [
        ({}, 15, 1),
        ({"TRANSACTION_CHECK_TIMES": "3"}, 15, 4),
        ({"TRANSACTION_CHECK_TIMES": "15"}, 15, None),
        ({"TRANSACTION_CHECK_TIMES": "x"}, 15, 0),
    ],
)
def test_next_check_times(props: dict[str, str], check_max: int, expected: int | None) -> None:
    """``needDiscard``: first check 1, then +1, discard at the max, unreadable counts again."""
    assert util.next_check_times(props, check_max) == expected


def test_op_body_and_op_offset_progress() -> None:
    """Op bodies parse as comma-separated offsets (junk skipped); op progress moves over the
    contiguous done offsets only."""
    assert util.parse_op_body(b"3,4,x,,17,") == [3, 4, 17]
    assert _calculate_op_offset([5, 3, 4, 7], 3) == 6
    assert _calculate_op_offset([], 9) == 9


async def test_custom_immunity_defers_the_check_and_bounds_a_late_end(harness: MakeHarness) -> None:
    """1. A half message with CHECK_IMMUNITY_TIME_IN_SECONDS=20 (transactionTimeOut 6 s).
    2. A check round 7 s later, another 14 s later. 3. A producer's END_TRANSACTION (not from a
    check) of the original, 21 s after it was born.
    Expected: at 7 s it is not checked but put back carrying TRAN_PREPARED_QUEUE_OFFSET = its
    queue offset; at 21 s (immunity over) the copy is checked; the late non-check commit is
    refused with ILLEGAL_OPERATION."""
    h = harness()
    svc = wire_txn(h)
    props = {**half_props(), "CHECK_IMMUNITY_TIME_IN_SECONDS": "20"}
    resp = await h.call(RequestCode.SEND_MESSAGE_V2, v2("TxnT", props=props, f="4"), b"b")
    assert resp is not None
    original = h.store.queues[(HALF, 0)][0]
    checked: list[StoredMessage] = []

    async def on_check(m: StoredMessage) -> None:
        checked.append(m)

    async def on_discard(m: StoredMessage) -> None:
        raise AssertionError(m)

    h.clock.advance(7000)
    await svc.check(6000, 15, on_check, on_discard)
    assert checked == []
    copies = h.store.queues[(HALF, 0)][1:]
    assert [c.properties[MessageConst.TRAN_PREPARED_QUEUE_OFFSET] for c in copies] == ["0"]
    h.clock.advance(14000)
    await svc.check(6000, 15, on_check, on_discard)
    assert [c.properties[MessageConst.TRAN_PREPARED_QUEUE_OFFSET] for c in checked] == ["0"]
    late = await h.call(RequestCode.END_TRANSACTION, end_ext(original, 8))
    assert late is not None
    assert late.code == ResponseCode.ILLEGAL_OPERATION
