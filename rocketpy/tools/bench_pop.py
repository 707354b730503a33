"""The ``popconsumer`` phase of ``python -m rocketpy.tools.benchmark``: POP-consume a topic.

Owns: :func:`run_pop_consumer`: ``--inflight`` concurrent receive loops of a
:class:`~rocketpy.client.simple_consumer.SimpleConsumer` (batch ``--batch``, at most 32), each
message acked, printing every ``--report-interval`` seconds the pop TPS (messages per second),
the receive round trip's p50/p99 and failures, then a summary. Must not: be used as a test
(numbers vary by machine).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time

from rocketpy.client.simple_consumer import SimpleConsumer
from rocketpy.common.errors import RocketPyError
from rocketpy.tools.loadgen import Latencies, Result

_INVISIBLE_S = 60.0


async def run_pop_consumer(
    namesrv: str,
    topic: str,
    group: str,
    *,
    duration_s: float,
    inflight: int = 4,
    batch: int = 32,
    expect: int | None = None,
    report_interval_s: float = 5.0,
    label: str = "popconsumer",
) -> Result:
    """POP ``topic`` until ``duration_s`` passed or ``expect`` messages were acked."""
    consumer = SimpleConsumer(group, namesrv, {topic: "*"}, await_duration_s=1.0, init_mode=0)
    window, total = Latencies(), Latencies()
    counts = {"popped": 0, "failed": 0, "window": 0}
    done = asyncio.Event()

    async def loop() -> None:
        while not done.is_set():
            started = time.perf_counter()
            try:
                msgs = await consumer.receive(min(batch, 32), _INVISIBLE_S)
                await asyncio.gather(*(consumer.ack(m) for m in msgs))
            except (RocketPyError, OSError, TimeoutError) as e:
                counts["failed"] += 1
                if counts["failed"] == 1:
                    print(f"pop failed: {e!r}", file=sys.stderr, flush=True)
                await asyncio.sleep(0.1)
                continue
            window.add((time.perf_counter() - started) * 1e6)
            counts["popped"] += len(msgs)
            counts["window"] += len(msgs)
            if expect is not None and counts["popped"] >= expect:
                done.set()

    await consumer.start()
    began = last = time.perf_counter()
    tasks = [asyncio.create_task(loop(), name=f"bench-pop-{i}") for i in range(inflight)]
    try:
        deadline = began + duration_s
        while not done.is_set() and time.perf_counter() < deadline:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(report_interval_s, deadline - time.perf_counter())):
                    await done.wait()
            now = time.perf_counter()
            lat, window = window, Latencies()
            total.merge(lat)
            print(
                f"Current Time: {time.strftime('%Y-%m-%d %H:%M:%S')} | Pop TPS: "
                f"{counts['window'] / max(now - last, 1e-9):,.0f} | p50(ms): "
                f"{lat.pct(0.5) / 1000:.3f} | p99(ms): {lat.pct(0.99) / 1000:.3f} | "
                f"Pop Failed: {counts['failed']}",
                flush=True,
            )
            last, counts["window"] = now, 0
    finally:
        done.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await consumer.shutdown()
    seconds = time.perf_counter() - began
    print(
        f"[Complete] popped {counts['popped']:,} messages in {seconds:.1f} s | Pop TPS: "
        f"{counts['popped'] / seconds:,.0f} | p50(ms): {total.pct(0.5) / 1000:.3f} | "
        f"p99(ms): {total.pct(0.99) / 1000:.3f}",
        flush=True,
    )
    return Result(label, len(total), seconds, total, counts["popped"], counts["failed"])
