"""The transaction and arrival runners of ``make bench-features`` (``bench_features``).

Owns: :func:`run_transactions` (keep ``inflight`` ``sendMessageInTransaction`` calls of a
:class:`~rocketpy.client.transaction_producer.TransactionProducer` outstanding for a duration,
the local transaction answering COMMIT_MESSAGE; returns the rate, the half-send-to-commit round
trip and the committed message ids) and :func:`await_arrivals` (push-consume a topic from its
first offset until every expected message id arrived or a deadline passed). Mirrors upstream's
``example/benchmark/TransactionProducer`` with the checker never needed (every local transaction
commits at once). Must not: be used as a test (numbers vary by machine), or count a message as
committed unless its half message was stored and the local outcome was COMMIT_MESSAGE.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time

from rocketpy.client.message import Message, MessageExt, SendStatus
from rocketpy.client.push_consumer import ConsumeFromWhere, ConsumeStatus, PushConsumer
from rocketpy.client.transaction_producer import LocalTransactionState, TransactionProducer
from rocketpy.tools.loadgen import Latencies, Result


def _commit(_msg: Message, _arg: object) -> LocalTransactionState:
    return LocalTransactionState.COMMIT_MESSAGE


async def run_transactions(
    namesrv: str,
    topic: str,
    *,
    body: bytes,
    inflight: int,
    duration_s: float,
    label: str = "TransactionProducer half + commit",
) -> tuple[Result, set[str]]:
    """Send transactional messages for ``duration_s`` with ``inflight`` outstanding, each
    committed by its local transaction. Returns the run (latency: half send through the oneway
    END_TRANSACTION) and the ids of the committed messages."""
    producer = TransactionProducer(
        "benchmark_transaction_producer", namesrv, checker=lambda _m: LocalTransactionState.UNKNOW
    )
    await producer.start()
    latencies = Latencies()
    committed: set[str] = set()
    failed = 0
    reasons: set[str] = set()
    deadline = time.perf_counter() + duration_s

    async def loop() -> None:
        nonlocal failed
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                result = await producer.send_message_in_transaction(
                    Message(topic=topic, body=body), _commit
                )
            except Exception as e:  # noqa: BLE001 - every failure is counted, the run goes on
                failed += 1
                if type(e).__name__ not in reasons:
                    reasons.add(type(e).__name__)
                    print(f"transaction failed: {e!r}", file=sys.stderr, flush=True)
                await asyncio.sleep(0.05)
                continue
            if (
                result.status is SendStatus.SEND_OK
                and result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
            ):
                latencies.add((time.perf_counter() - started) * 1e6)
                committed.add(result.msg_id)
            else:
                failed += 1

    began = time.perf_counter()
    try:
        await asyncio.gather(*(loop() for _ in range(inflight)))
    finally:
        seconds = time.perf_counter() - began
        await producer.shutdown()
    return Result(label, len(latencies), seconds, latencies, len(committed), failed), committed


async def await_arrivals(
    namesrv: str, topic: str, group: str, expected: set[str], *, deadline_s: float
) -> tuple[int, int]:
    """Push-consume ``topic`` from its first offset until every id of ``expected`` arrived or
    ``deadline_s`` passed. Returns (expected ids that arrived, messages not expected)."""
    pending = set(expected)
    unexpected = 0
    done = asyncio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        nonlocal unexpected
        for m in msgs:
            if m.msg_id in pending:
                pending.discard(m.msg_id)
            elif m.msg_id not in expected:
                unexpected += 1
        if not pending:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group, namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    if not pending:
        return 0, 0
    await consumer.start()
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(deadline_s):
                await done.wait()
    finally:
        await consumer.shutdown()
    return len(expected) - len(pending), unexpected
