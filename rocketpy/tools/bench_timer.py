"""Timer-message benchmark: how late 5.x timer messages arrive.

Owns: ``python -m rocketpy.tools.benchmark timer``: send ``--count`` messages with
``deliver_time_ms`` ``--delay`` seconds after each send (``--inflight`` outstanding), push-consume
the topic and print the delivery lateness (arrival minus ``TIMER_DELIVER_MS``) p50/p99/max and
how many came early or never. A plain message goes first and the timer messages only once the
consumer received it, so the consumer's start (route, rebalance) is not counted as lateness.
Mirrors upstream's ``example/benchmark/timer`` ``TimerProducer``/``TimerConsumer`` pair in one
command. Must not: be used as a test (numbers vary by machine).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from rocketpy.client.message import Message, MessageExt, SendStatus
from rocketpy.client.producer import Producer
from rocketpy.client.push_consumer import ConsumeStatus, PushConsumer
from rocketpy.common.message.const import MessageConst
from rocketpy.tools.loadgen import Latencies, Result


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _TimerRun:
    """Counters of one run."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.late = Latencies()
        self.early = self.received = self.sent = self.failed = self.next_index = 0
        self.seen: set[str] = set()
        self.done = asyncio.Event()
        self.warm = asyncio.Event()

    async def listener(self, msgs: list[MessageExt]) -> ConsumeStatus:
        now = _now_ms()
        for m in msgs:
            due = m.properties.get(MessageConst.TIMER_DELIVER_MS)
            if due is None:
                self.warm.set()
                continue
            if m.msg_id in self.seen:
                continue
            self.seen.add(m.msg_id)
            self.received += 1
            lateness = now - int(due)
            self.early += lateness < 0
            self.late.add(max(lateness, 0) * 1000)
        if self.received >= self.count:
            self.done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    async def send_loop(self, producer: Producer, topic: str, delay_ms: int) -> None:
        while self.next_index < self.count:
            self.next_index += 1
            msg = Message(topic=topic, body=b"timer", deliver_time_ms=_now_ms() + delay_ms)
            try:
                result = await producer.send(msg)
            except Exception:  # noqa: BLE001 - every failure is counted, the run goes on
                self.failed += 1
                continue
            if result.status is SendStatus.SEND_OK:
                self.sent += 1
            else:
                self.failed += 1


async def run_timer(
    namesrv: str,
    topic: str,
    group: str,
    *,
    count: int,
    delay_s: float,
    inflight: int,
    wait_s: float = 30.0,
    label: str = "timer",
    on_sending: Callable[[], None] | None = None,
    on_sent: Callable[[int, int, float], None] | None = None,
) -> Result:
    """Send ``count`` timer messages due ``delay_s`` after their send; consume them; report the
    lateness. Returns the lateness (microseconds) as a :class:`Result`. ``on_sending()`` is
    called just before the first timer message is sent (the consumer started), ``on_sent(sent,
    delivered, seconds)`` is called once the last send was answered, before any waiting for
    deliveries (``make bench-features`` reads the broker's RSS and CPU there, timers pending)."""
    run = _TimerRun(count)
    consumer = PushConsumer(group, namesrv)
    consumer.subscribe(topic, "*")
    consumer.register_listener(run.listener)
    producer = Producer("benchmark_timer_producer", namesrv)
    await producer.start()
    await consumer.start()
    started = time.perf_counter()
    try:
        await producer.send(Message(topic=topic, body=b"warm-up"))  # creates the topic
        async with asyncio.timeout(wait_s):
            await run.warm.wait()
        if on_sending is not None:
            on_sending()
        started = time.perf_counter()
        delay_ms = int(delay_s * 1000)
        await asyncio.gather(*(run.send_loop(producer, topic, delay_ms) for _ in range(inflight)))
        send_s = time.perf_counter() - started
        if on_sent is not None:
            on_sent(run.sent, run.received, send_s)
        try:
            async with asyncio.timeout(delay_s + wait_s):
                await run.done.wait()
        except TimeoutError:
            pass
    finally:
        await producer.shutdown()
        await consumer.shutdown()
    late = run.late
    print(
        f"[Complete] timer messages sent {run.sent:,} (failed {run.failed}) in {send_s:.1f} s | "
        f"delivered {run.received:,} | early {run.early} | "
        f"missing {max(run.sent - run.received, 0)} | lateness p50(ms): {late.pct(0.5) / 1000:.0f}"
        f" | p99(ms): {late.pct(0.99) / 1000:.0f} | max(ms): {late.max / 1000:.0f}",
        flush=True,
    )
    return Result(
        label, run.received, time.perf_counter() - started, late, run.received, run.failed
    )
