"""ConsumeConcurrentlyService: the worker pool behind PushConsumer's concurrent listener calls."""

from __future__ import annotations

import asyncio

from rocketpy.client.consume_service import ConsumeConcurrentlyService, ConsumeStatus
from rocketpy.client.message import MessageExt, MessageQueue
from rocketpy.client.rebalance import ProcessQueue
from rocketpy.common.aio import wait_until
from tests.helpers.client_messages import message_at

_MQ = MessageQueue(topic="T", broker_name="b", queue_id=0)
_RETRY_MQ = MessageQueue(topic="%RETRY%g", broker_name="b", queue_id=0)


_msg = message_at


def _service(
    concurrency: int, batch: int, sent_back: list[int], *, take_back: bool = True
) -> ConsumeConcurrentlyService:
    async def send_back(msg: MessageExt) -> bool:
        sent_back.append(msg.queue_offset)
        return take_back

    return ConsumeConcurrentlyService(
        group="g",
        retry_topic="%RETRY%g",
        concurrency=concurrency,
        batch_max_size=batch,
        send_back=send_back,
        stop_event=asyncio.Event(),
        consume_later_s=0.05,
    )


def _queue(mq: MessageQueue, msgs: list[MessageExt]) -> ProcessQueue:
    pq = ProcessQueue(mq, 0, threshold=1000)
    pq.put(msgs)
    return pq


async def test_consume_service_bounds_calls_in_flight_and_commits_in_order() -> None:
    """1. Three workers, one message per call, a listener that waits for a gate. 2. Submit 10
    messages. 3. Open the gate.
    Expected: 3 calls in flight while closed, never more, in FIFO order; afterwards all 10
    consumed once, the offset cell at 10 and nothing busy."""
    gate = asyncio.Event()
    calls: list[int] = []
    in_flight = [0, 0]  # now, most

    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        calls.extend(m.queue_offset for m in msgs)
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        await gate.wait()
        in_flight[0] -= 1
        return ConsumeStatus.CONSUME_SUCCESS

    service = _service(3, 1, [])
    msgs = [_msg(i) for i in range(10)]
    pq = _queue(_MQ, msgs)
    service.start(listener)
    try:
        service.submit(pq, msgs)
        await wait_until(lambda: len(calls) == 3, timeout_s=5)
        assert (calls, service.busy) == ([0, 1, 2], 3)
        gate.set()
        await wait_until(lambda: pq.offset_cell.value == 10, timeout_s=5)
        assert calls == list(range(10))
        assert in_flight == [0, 3]
        await service.wait_idle(5)
        assert service.busy == 0
    finally:
        await service.cancel()


async def test_consume_service_batches_and_restores_retry_topic() -> None:
    """1. Batch size 4, a listener that never suspends. 2. Submit 10 messages of the retry topic,
    one carrying RETRY_TOPIC=Orig.
    Expected: calls of 4, 4 and 2 messages; the carrier is shown with topic Orig, the others keep
    theirs; the offset cell ends at 10."""
    sizes: list[int] = []
    topics: list[str] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        sizes.append(len(msgs))
        topics.extend(m.topic for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    service = _service(2, 4, [])
    msgs = [_msg(i, "%RETRY%g", {"RETRY_TOPIC": "Orig"} if i == 5 else None) for i in range(10)]
    pq = _queue(_RETRY_MQ, msgs)
    service.start(listener)
    try:
        service.submit(pq, msgs)
        await wait_until(lambda: pq.offset_cell.value == 10, timeout_s=5)
        assert sizes == [4, 4, 2]
        assert topics == ["%RETRY%g"] * 5 + ["Orig"] + ["%RETRY%g"] * 4
    finally:
        await service.cancel()


async def test_consume_service_failures_send_back_or_retry_later() -> None:
    """1. A listener that answers RECONSUME_LATER the first time it sees each message (and
    raises for offset 1). 2a. The broker takes messages back. 2b. The broker refuses.
    Expected: (a) both messages are sent back once and the offset advances to 2 without a second
    call; (b) both are sent back, then consumed again locally after the delay; the offset reaches
    2 only after the second call."""
    for take_back in (True, False):
        seen: list[int] = []
        sent: list[int] = []

        async def listener(msgs: list[MessageExt], seen: list[int] = seen) -> ConsumeStatus:
            first = msgs[0].queue_offset not in seen
            seen.extend(m.queue_offset for m in msgs)
            if first and msgs[0].queue_offset == 1:
                raise RuntimeError("listener failure")
            return ConsumeStatus.RECONSUME_LATER if first else ConsumeStatus.CONSUME_SUCCESS

        service = _service(2, 1, sent, take_back=take_back)
        msgs = [_msg(0), _msg(1)]
        pq = _queue(_MQ, msgs)
        service.start(listener)
        try:
            service.submit(pq, msgs)
            await wait_until(lambda pq=pq: pq.offset_cell.value == 2, timeout_s=5)
            assert sorted(sent) == [0, 1]
            assert sorted(seen) == ([0, 1] if take_back else [0, 0, 1, 1])
        finally:
            await service.cancel()


async def test_consume_service_skips_requests_of_dropped_queues() -> None:
    """1. One worker; a gate holds the first call. 2. Submit 3 messages; drop the queue while
    the first call waits. 3. Open the gate.
    Expected: only the first message reaches the listener; the dropped queue's offset cell is not
    advanced."""
    gate = asyncio.Event()
    calls: list[int] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        calls.extend(m.queue_offset for m in msgs)
        await gate.wait()
        return ConsumeStatus.CONSUME_SUCCESS

    service = _service(1, 1, [])
    msgs = [_msg(i) for i in range(3)]
    pq = _queue(_MQ, msgs)
    service.start(listener)
    try:
        service.submit(pq, msgs)
        await wait_until(lambda: calls == [0], timeout_s=5)
        pq.dropped = True
        gate.set()
        # The worker takes the next requests right after the call returns, without suspending:
        # once nothing is busy, it has seen them all.
        await service.wait_idle(5)
        assert calls == [0]
        assert pq.offset_cell.value == -1
    finally:
        await service.cancel()
