"""Delay-level runner of ``make bench-features`` (:mod:`rocketpy.tools.bench_features`).

Owns: :func:`run_delay_levels`: send ``per_level`` messages to every delay level of the broker's
``messageDelayLevel`` interleaved (level 1, 2, ... 18, 1, 2, ... so every level is busy at once)
with ``inflight`` sends outstanding, push-consume the topic as the schedule service delivers
them, and count per level the lateness (arrival minus born timestamp minus the level's delay),
how many came early or never, and when the level's last message arrived. A plain message goes
first and the delayed ones only once the consumer received it, so the consumer's start is not
counted as lateness. Mirrors what upstream's ``ScheduleMessageService`` promises (one queue and
one delivery loop per level: a short level is never held back by a long one). Must not: be used
as a test (numbers vary by machine).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from rocketpy.client.message import Message, MessageExt, SendStatus
from rocketpy.client.producer import Producer
from rocketpy.client.push_consumer import ConsumeStatus, PushConsumer
from rocketpy.tools.loadgen import Latencies

#: User property carrying the level a benchmark message was sent with.
LEVEL_PROPERTY = "benchDelayLevel"


@dataclass(slots=True)
class LevelStats:
    """One delay level's counts; ``late`` in microseconds, ``last_s`` the last arrival in
    seconds after the sends began."""

    delay_ms: int
    sent: int = 0
    received: int = 0
    early: int = 0
    late: Latencies = field(default_factory=Latencies)
    last_s: float = 0.0


@dataclass(slots=True)
class DelayRun:
    """A whole delay-level run."""

    levels: dict[int, LevelStats]
    send_seconds: float = 0.0
    failed: int = 0

    @property
    def sent(self) -> int:
        """Messages acknowledged SEND_OK."""
        return sum(s.sent for s in self.levels.values())

    @property
    def received(self) -> int:
        """Distinct messages delivered."""
        return sum(s.received for s in self.levels.values())


class _Levels:
    """The consumer's and the senders' side of one run."""

    def __init__(self, delays_ms: Mapping[int, int], per_level: int) -> None:
        self.run = DelayRun({lvl: LevelStats(ms) for lvl, ms in delays_ms.items()})
        self.seen: set[str] = set()
        self.warm, self.done = asyncio.Event(), asyncio.Event()
        self.began = time.perf_counter()
        # Until the sends end every message is awaited; then only the acknowledged ones.
        self.target = per_level * len(self.run.levels)
        self.order = iter([lvl for _ in range(per_level) for lvl in sorted(self.run.levels)])

    async def listener(self, msgs: list[MessageExt]) -> ConsumeStatus:
        now_ms, now_s = time.time_ns() // 1_000_000, time.perf_counter() - self.began
        for m in msgs:
            level = m.properties.get(LEVEL_PROPERTY)
            if level is None:
                self.warm.set()
                continue
            if m.msg_id in self.seen:
                continue
            self.seen.add(m.msg_id)
            stats = self.run.levels[int(level)]
            stats.received += 1
            lateness = now_ms - m.born_timestamp - stats.delay_ms
            stats.early += lateness < 0
            stats.late.add(max(lateness, 0) * 1000)
            stats.last_s = now_s
        self._check()
        return ConsumeStatus.CONSUME_SUCCESS

    def _check(self) -> None:
        if len(self.seen) >= self.target:
            self.done.set()

    def sends_ended(self) -> None:
        """Wait only for the messages the broker acknowledged."""
        self.run.send_seconds = time.perf_counter() - self.began
        self.target = self.run.sent
        self._check()

    async def send_loop(self, producer: Producer, topic: str) -> None:
        for level in self.order:
            msg = Message(
                topic=topic, body=b"delay", delay_level=level,
                properties={LEVEL_PROPERTY: str(level)},
            )  # fmt: skip
            try:
                result = await producer.send(msg)
            except Exception:  # noqa: BLE001 - every failure is counted, the run goes on
                self.run.failed += 1
                continue
            if result.status is SendStatus.SEND_OK:
                self.run.levels[level].sent += 1
            else:
                self.run.failed += 1


async def run_delay_levels(
    namesrv: str,
    topic: str,
    group: str,
    *,
    delays_ms: Mapping[int, int],
    per_level: int,
    inflight: int,
    wait_s: float = 30.0,
    on_sending: Callable[[], None] | None = None,
    on_sent: Callable[[DelayRun], None] | None = None,
) -> DelayRun:
    """Send ``per_level`` messages to each level of ``delays_ms`` (level -> delay, the broker's
    ``messageDelayLevel``), consume them; give up ``wait_s`` after the longest delay.
    ``on_sending()`` is called just before the first delayed send (the consumer started),
    ``on_sent(run)`` once the last send was answered."""
    state = _Levels(delays_ms, per_level)
    consumer = PushConsumer(group, namesrv)
    consumer.subscribe(topic, "*")
    consumer.register_listener(state.listener)
    producer = Producer("benchmark_delay_producer", namesrv)
    await producer.start()
    await consumer.start()
    try:
        await producer.send(Message(topic=topic, body=b"warm-up"))  # creates the topic
        async with asyncio.timeout(wait_s):
            await state.warm.wait()
        if on_sending is not None:
            on_sending()
        state.began = time.perf_counter()
        await asyncio.gather(*(state.send_loop(producer, topic) for _ in range(inflight)))
        state.sends_ended()
        if on_sent is not None:
            on_sent(state.run)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(delays_ms.values(), default=0) / 1000 + wait_s):
                await state.done.wait()
    finally:
        await producer.shutdown()
        await consumer.shutdown()
    return state.run


def held_back(run: DelayRun, limit_ms: float) -> list[int]:
    """Levels whose p99 lateness exceeds ``limit_ms`` or that lost messages."""
    return [
        lvl
        for lvl, s in sorted(run.levels.items())
        if s.late.pct(0.99) / 1000 > limit_ms or s.received < s.sent
    ]


__all__ = ["DelayRun", "LevelStats", "held_back", "run_delay_levels"]
