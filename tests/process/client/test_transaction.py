"""Transactional messages end to end: TransactionProducer against a real namesrv + broker.

The broker checks undecided half messages every 300 ms once they are 1 s old, at most 3 times.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from rocketpy.client.message import Message, MessageExt, SendStatus
from rocketpy.client.producer import Producer
from rocketpy.client.transaction_producer import (
    LocalTransactionState,
    TransactionChecker,
    TransactionProducer,
)
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.decoder import decode_offset_msg_id, decode_records
from rocketpy.common.message.record import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageRecord,
)
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.cluster import Cluster, start_cluster, unique

pytestmark = pytest.mark.process

TXN_EXTRA = "transactionCheckInterval=300\ntransactionTimeOut=1000\ntransactionCheckMax=3\n"
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
BAD_QUEUE_OFFSET = "The transaction state table offset wrong"
NOT_FOUND = "Find prepared transaction message failed"


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A namesrv + broker with a fast transaction check."""
    c = start_cluster(tmp_path_factory.mktemp("txn"), TXN_EXTRA)
    try:
        yield c
    finally:
        c.stop()


async def pull_topic(addr: str, topic: str, queues: int = 4) -> list[MessageRecord]:
    """Every record of ``topic``'s queues, as a consumer of group ``inspect`` pulls them."""
    client = JavaLikeClient()
    out: list[MessageRecord] = []
    try:
        for q in range(queues):
            response = await client.pull(addr, "inspect", topic, 0, queue_id=q, expression="*")
            if response.code == ResponseCode.SUCCESS:
                out += decode_records(response.body or b"")
    finally:
        await client.close()
    return out


def txn_producer(
    cluster: Cluster, checker: TransactionChecker, group: str | None = None
) -> TransactionProducer:
    """A TransactionProducer that heartbeats and refreshes routes quickly."""
    return TransactionProducer(
        group or unique("txn_pg"),
        cluster.namesrv_addr,
        checker=checker,
        heartbeat_interval_s=0.3,
        poll_namesrv_interval_s=0.3,
    )


async def _marker(cluster: Cluster, topic: str) -> None:
    """Send a plain message to ``topic`` and wait until it is pullable: every earlier
    commit has been dispatched by then."""
    producer = Producer(unique("marker_pg"), cluster.namesrv_addr)
    await producer.start()
    try:
        await producer.send(Message(topic=topic, body=b"marker"))
    finally:
        await producer.shutdown()
    while not any(m.body == b"marker" for m in await pull_topic(cluster.broker_addr, topic)):
        await asyncio.sleep(0.05)


def bodies(msgs: list[MessageRecord]) -> list[bytes]:
    """The bodies of ``msgs``, in order."""
    return [m.body for m in msgs]


def recording(into: list[MessageExt], answer: LocalTransactionState) -> TransactionChecker:
    """A checker that records what it is asked and always answers ``answer``."""

    def checker(msg: MessageExt) -> LocalTransactionState:
        into.append(msg)
        return answer

    return checker


async def test_txn_commit_is_delivered_once_and_half_topic_is_not_pullable(
    txn_cluster: Cluster,
) -> None:
    """1. A TransactionProducer sends a half message; the local transaction commits.
    2. Pull every queue of the topic, wait past several check rounds, pull again.
    3. Pull RMQ_SYS_TRANS_HALF_TOPIC as an ordinary consumer group.
    Expected: SEND_OK with local state COMMIT_MESSAGE; the message is in the topic exactly once,
    with the commit transaction type, its half message's commit-log offset as
    PREPARED_TRANSACTION_OFFSET, the producer's properties and no REAL_TOPIC/REAL_QID/TRAN_MSG;
    the checker is never called; the half topic pull is refused with NO_PERMISSION."""
    topic = unique("TxnCommit")
    checked: list[MessageExt] = []
    producer = txn_producer(txn_cluster, recording(checked, COMMIT))
    await producer.start()
    client = JavaLikeClient()
    try:
        async with asyncio.timeout(30):
            result = await producer.send_message_in_transaction(
                Message(topic=topic, body=b"committed", tags="TagT", keys="k1"),
                lambda _m, _a: COMMIT,
            )
            while not await pull_topic(txn_cluster.broker_addr, topic):
                await asyncio.sleep(0.05)
            await asyncio.sleep(2.0)  # several check rounds
            again = await pull_topic(txn_cluster.broker_addr, topic)
            half = await client.pull(
                txn_cluster.broker_addr, "inspect", "RMQ_SYS_TRANS_HALF_TOPIC", 0, expression="*"
            )
    finally:
        await client.close()
        await producer.shutdown()
    assert result.status is SendStatus.SEND_OK
    assert result.local_transaction_state is COMMIT
    assert bodies(again) == [b"committed"]
    msg = again[0]
    assert msg.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE
    assert msg.prepared_transaction_offset == decode_offset_msg_id(result.offset_msg_id)[1]
    props = msg.property_map()
    assert props[MessageConst.TAGS] == "TagT"
    assert props[MessageConst.KEYS] == "k1"
    assert props[MessageConst.UNIQ_KEY] == result.msg_id
    assert props[MessageConst.PGROUP] == producer.group
    for gone in (MessageConst.REAL_TOPIC, MessageConst.REAL_QID, MessageConst.TRAN_MSG):
        assert gone not in props
    assert not checked
    assert half.code == ResponseCode.NO_PERMISSION


async def test_txn_rollback_is_never_delivered(txn_cluster: Cluster) -> None:
    """1. A half message whose local transaction rolls back. 2. A plain marker message to the
    same topic, pulled. 3. Several check rounds pass.
    Expected: local state ROLLBACK_MESSAGE; only the marker is in the topic; no check-back."""
    topic = unique("TxnRollback")
    checked: list[MessageExt] = []
    producer = txn_producer(txn_cluster, recording(checked, COMMIT))
    await producer.start()
    try:
        async with asyncio.timeout(30):
            result = await producer.send_message_in_transaction(
                Message(topic=topic, body=b"rolled-back"), lambda _m, _a: ROLLBACK
            )
            await _marker(txn_cluster, topic)
            await asyncio.sleep(2.0)
            got = await pull_topic(txn_cluster.broker_addr, topic)
    finally:
        await producer.shutdown()
    assert result.local_transaction_state is ROLLBACK
    assert bodies(got) == [b"marker"]
    assert not checked


@pytest.mark.parametrize("answer", [COMMIT, ROLLBACK], ids=["commit", "rollback"])
async def test_txn_unknown_is_checked_back_and_resolved_by_the_checker(
    txn_cluster: Cluster, answer: LocalTransactionState
) -> None:
    """1. A half message whose local transaction answers UNKNOW (and an async checker that
    answers ``answer``). 2. Wait until the broker checked it back. 3. Marker, then several
    more check rounds.
    Expected: the checker is asked about the message (real topic, the producer's UNIQ_KEY and
    body); with COMMIT the message is in the topic exactly once, with ROLLBACK never; once
    answered it is not checked again (a slow answer may meet one more check first)."""
    topic = unique("TxnCheck")
    checked: list[MessageExt] = []

    async def checker(msg: MessageExt) -> LocalTransactionState:
        checked.append(msg)
        return answer

    producer = txn_producer(txn_cluster, checker)
    await producer.start()
    try:
        async with asyncio.timeout(30):
            result = await producer.send_message_in_transaction(
                Message(topic=topic, body=b"undecided"), lambda _m, _a: UNKNOW
            )
            while not checked:
                await asyncio.sleep(0.05)
            await _marker(txn_cluster, topic)
            asked = len(checked)
            await asyncio.sleep(2.0)
            got = await pull_topic(txn_cluster.broker_addr, topic)
    finally:
        await producer.shutdown()
    assert result.local_transaction_state is UNKNOW
    assert len(checked) == asked  # answered: not checked again
    assert {m.msg_id for m in checked} == {result.msg_id}
    assert checked[0].topic == topic
    assert checked[0].msg_id == result.msg_id
    assert checked[0].body == b"undecided"
    expected = [b"undecided", b"marker"] if answer is COMMIT else [b"marker"]
    assert sorted(bodies(got)) == sorted(expected)


async def test_txn_producer_gone_is_discarded_after_check_max(txn_cluster: Cluster) -> None:
    """1. A half message answered UNKNOW; the producer shuts down (no live channel of its
    group). 2. Wait for transactionCheckMax (3) rounds and the discard.
    Expected: the half message lands in TRANS_CHECK_MAX_TIME_TOPIC with
    TRANSACTION_CHECK_TIMES=3 and its real topic; the real topic never gets it."""
    topic = unique("TxnGone")
    producer = txn_producer(txn_cluster, lambda _m: COMMIT)
    await producer.start()
    try:
        async with asyncio.timeout(10):
            result = await producer.send_message_in_transaction(
                Message(topic=topic, body=b"orphan"), lambda _m, _a: UNKNOW
            )
    finally:
        await producer.shutdown()
    parked: list[MessageRecord] = []
    async with asyncio.timeout(30):
        while not parked:
            parked = [
                m
                for m in await pull_topic(txn_cluster.broker_addr, "TRANS_CHECK_MAX_TIME_TOPIC", 1)
                if m.property_map().get(MessageConst.UNIQ_KEY) == result.msg_id
            ]
            await asyncio.sleep(0.1)
        await _marker(txn_cluster, topic)
    props = parked[0].property_map()
    assert props[MessageConst.TRANSACTION_CHECK_TIMES] == "3"
    assert props[MessageConst.REAL_TOPIC] == topic
    assert bodies(await pull_topic(txn_cluster.broker_addr, topic)) == [b"marker"]


def _end_header(group: str, queue_offset: int, commit_log_offset: int, kind: int) -> dict[str, str]:
    return {
        "producerGroup": group,
        "tranStateTableOffset": str(queue_offset),
        "commitLogOffset": str(commit_log_offset),
        "commitOrRollback": str(kind),
        "fromTransactionCheck": "false",
        "msgId": "X",
    }


async def test_end_transaction_with_bad_offsets_is_answered_and_harmless(
    txn_cluster: Cluster,
) -> None:
    """1. A Java-like client sends a half message (TRAN_MSG, PGROUP, prepared sys flag).
    2. END_TRANSACTION (two-way) commits with: a commit-log offset past the end, a negative one,
    one inside the record, one of a record that is no half message, the wrong producer group,
    the wrong queue offset, a commitOrRollback beyond Java's int, a missing field.
    3. The right commit, twice.
    Expected: every bad request is answered SYSTEM_ERROR with upstream's remark; nothing reaches
    the topic; the right commit answers SUCCESS twice and stores the message once."""
    topic = unique("TxnBad")
    client = JavaLikeClient(producer_group="bad_pg")
    addr = txn_cluster.broker_addr
    try:
        async with asyncio.timeout(30):
            plain = await client.send(addr, topic, b"plain", queue_id=1)
            ext = client.send_header(
                topic,
                0,
                {"UNIQ_KEY": unique("U").ljust(32, "0"), "WAIT": "true", "TRAN_MSG": "true",
                 "PGROUP": "bad_pg"},
            )  # fmt: skip
            ext["f"] = "4"
            sent = await client.call(addr, RequestCode.SEND_MESSAGE_V2, ext, b"half")
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            q_off = int(sent.ext("queueOffset") or -1)
            phy = decode_offset_msg_id(sent.ext("msgId") or "")[1]
            plain_phy = decode_offset_msg_id(plain.ext("msgId") or "")[1]
            bad = [
                (_end_header("bad_pg", q_off, 2**40, 8), NOT_FOUND),
                (_end_header("bad_pg", q_off, -5, 8), NOT_FOUND),
                (_end_header("bad_pg", q_off, phy + 7, 8), NOT_FOUND),
                (_end_header("bad_pg", 0, plain_phy, 8), NOT_FOUND),
                (_end_header("other_pg", q_off, phy, 8), "The producer group wrong"),
                (_end_header("bad_pg", q_off + 1, phy, 8), BAD_QUEUE_OFFSET),
                (_end_header("bad_pg", q_off, phy, 2**33), None),
                ({"producerGroup": "bad_pg"}, None),
            ]  # fmt: skip
            answers = [await client.call(addr, RequestCode.END_TRANSACTION, ext) for ext, _ in bad]
            ok1 = await client.call(
                addr, RequestCode.END_TRANSACTION, _end_header("bad_pg", q_off, phy, 8)
            )
            ok2 = await client.call(
                addr, RequestCode.END_TRANSACTION, _end_header("bad_pg", q_off, phy, 8)
            )
            got: list[MessageRecord] = []
            while b"half" not in bodies(got):
                got = await pull_topic(addr, topic)
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.5)
            final = await pull_topic(addr, topic)
    finally:
        await client.close()
    for answer, (_, remark) in zip(answers, bad, strict=True):
        assert answer.code == ResponseCode.SYSTEM_ERROR
        if remark is not None:
            assert answer.remark == remark
    assert ok1.code == ResponseCode.SUCCESS
    assert ok2.code == ResponseCode.SUCCESS
    assert sorted(bodies(final)) == [b"half", b"plain"]
