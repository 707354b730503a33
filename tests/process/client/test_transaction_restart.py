"""Transactional messages across a SIGKILL of the broker: the check-back resumes after restart."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from rocketpy.client.message import Message, MessageExt
from rocketpy.client.transaction_producer import LocalTransactionState, TransactionProducer
from rocketpy.common.message.const import MessageConst
from tests.helpers.cluster import FAST_DELAY_LEVELS, start_cluster
from tests.helpers.processes import start_broker
from tests.process.client.test_transaction import TXN_EXTRA, bodies, pull_topic

pytestmark = pytest.mark.process

EXTRA = TXN_EXTRA + "flushDiskType=SYNC_FLUSH\nflushConsumerOffsetInterval=100\n"
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


async def test_txn_sigkill_between_half_and_end_is_resolved_after_restart(
    tmp_path: Path,
) -> None:
    """1. namesrv + broker (SYNC_FLUSH, fast check). 2. Half messages A and B whose local
    transactions answer UNKNOW; half message C whose local transaction SIGKILLs the broker and
    then commits (its END_TRANSACTION cannot arrive). The checker answers UNKNOW until step 4.
    3. Restart the broker on the same store (new port). 4. The checker now answers A: COMMIT,
    B: ROLLBACK, C: COMMIT. 5. Wait for A and C, then several check rounds.
    Expected: after the restart the broker checks back all three; A and C are in the topic exactly
    once each, B never."""
    cluster = start_cluster(tmp_path, EXTRA)
    topic = "TxnRestart"
    answers = {b"A": COMMIT, b"B": ROLLBACK, b"C": COMMIT}
    armed = False
    asked: list[bytes] = []

    def checker(msg: MessageExt) -> LocalTransactionState:
        if not armed:
            return UNKNOW
        asked.append(msg.body)
        return answers[msg.body]

    def kill_then_commit(_msg: Message, _arg: object) -> LocalTransactionState:
        cluster.broker.proc.kill()
        cluster.broker.stop()
        return COMMIT

    producer = TransactionProducer(
        "txn_restart_pg",
        cluster.namesrv_addr,
        checker=checker,
        heartbeat_interval_s=0.3,
        poll_namesrv_interval_s=0.3,
    )
    await producer.start()
    try:
        async with asyncio.timeout(60):
            for body in (b"A", b"B"):
                await producer.send_message_in_transaction(
                    Message(topic=topic, body=body), lambda _m, _a: UNKNOW
                )
            c = await producer.send_message_in_transaction(
                Message(topic=topic, body=b"C"), kill_then_commit
            )
            broker, addr = start_broker(
                tmp_path, cluster.namesrv_addr, extra=FAST_DELAY_LEVELS + EXTRA
            )
            cluster.broker, cluster.broker_addr = broker, addr
            armed = True
            got: list[bytes] = []
            while sorted(got) != [b"A", b"C"]:
                await asyncio.sleep(0.1)
                got = bodies(await pull_topic(addr, topic))
                assert len(got) <= 2, got
            await asyncio.sleep(2.0)
            final = await pull_topic(addr, topic)
    finally:
        await producer.shutdown()
        with contextlib.suppress(AssertionError):
            cluster.stop()
    assert c.local_transaction_state is COMMIT
    assert sorted(bodies(final)) == [b"A", b"C"]
    assert {m.property_map()[MessageConst.UNIQ_KEY] for m in final} >= {c.msg_id}
    assert set(asked) == {b"A", b"B", b"C"}
