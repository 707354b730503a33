"""``make bench`` (``python -m rocketpy.tools.bench_suite``): the whole benchmark on loopback.

Owns: starting a NameServer, a broker (ASYNC_FLUSH, its topic created with 8 queues as an
operator would) and an echo server as child processes, then running every phase -- the raw
loopback ceiling, pipelined raw frames, ``Producer.send`` at ``--inflight`` and at 1 in flight,
batches, a push consumer catching up with everything acknowledged, timer messages' delivery
lateness -- and printing each figure
beside the ceiling measured in the same run, with the CPU each message cost the broker and the
client (steady even on a busy machine); ``--soak`` adds a long run sampling the broker's RSS.
Must not: be used as a test (numbers vary by machine), or talk to anything but loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.tools.bench_timer import run_timer
from rocketpy.tools.benchmark import (
    add_load_arguments,
    run_consumer,
    run_loop,
    run_producer,
    send_frames,
)
from rocketpy.tools.children import Child, spawn, spawn_namesrv_and_broker, stop
from rocketpy.tools.loadgen import Result, cpu_seconds, drive, memory_summary, rss_mb

ECHO_BOOT = re.compile(r"echo server listening on 127\.0\.0\.1:(\d+)")


def _line(res: Result, size: int, ceiling: Result | None = None, cpu: str = "") -> None:
    ratio = f"   {res.message_rate / ceiling.message_rate:6.1%} of ceiling" if ceiling else ""
    print(
        f"  {res.label:<44} {res.message_rate:>10,.0f} msg/s {res.message_rate * size / 1e6:7.2f}"
        f" MB/s   p50 {res.pct(0.5) / 1000:7.3f} ms   p99 {res.pct(0.99) / 1000:7.3f} ms"
        f"   failed {res.failures}{ratio}{cpu}",
        flush=True,
    )


async def _cpu_metered(broker_pid: int, run: Coroutine[Any, Any, Result]) -> tuple[Result, str]:
    """Run a phase and describe the CPU it cost per message: the broker's (from ``/proc``) and
    this process's (the client or load generator). Unlike msg/s, these do not depend on how busy
    a shared machine is."""
    broker0, client0 = cpu_seconds(broker_pid), time.process_time()
    res = await run
    broker1, client1 = cpu_seconds(broker_pid), time.process_time()
    n = max(1, res.messages or res.requests)
    return res, (
        f"   CPU/msg broker {(broker1 - broker0) * 1e6 / n:6.1f} us"
        f" client {(client1 - client0) * 1e6 / n:6.1f} us"
    )


async def suite(args: argparse.Namespace, workdir: Path) -> None:
    """``make bench``: a NameServer, a broker and an echo server as child processes under
    ``workdir``, every phase run against them (``args`` from :func:`main`'s command line)."""
    children = spawn_namesrv_and_broker(
        workdir, "flushDiskType=ASYNC_FLUSH\nautoCreateTopicEnable=true\ndefaultTopicQueueNums=8\n"
    )
    try:
        namesrv, broker = f"127.0.0.1:{children[0].booted}", children[1]
        echo = spawn(["-m", "rocketpy.tools.benchmark", "echo"], ECHO_BOOT, workdir, "echo")
        children.append(echo)
        await _run_phases(args, namesrv, broker, echo)
    finally:
        for child in reversed(children):
            stop(child)


async def _run_phases(args: argparse.Namespace, namesrv: str, broker: Child, echo: Child) -> None:
    topic, d, pid = args.topic, args.duration, broker.proc.pid
    print(f"broker pid {pid} idle: {memory_summary(pid)}; {args.size} B messages, {d:.0f} s/phase")
    frames = send_frames(topic, args.size, 8192)
    # The topic, as an operator makes one (mqadmin updateTopic, upstream's 8 read/write queues):
    # a send would auto-create it with the producer's defaultTopicQueueNums (4), and queues
    # are how far a push consumer pipelines its pulls (one in flight per queue).
    admin = AdminClient(namesrv)
    try:
        await admin.create_topic(f"127.0.0.1:{broker.booted}", TopicSpec(topic=topic))
    finally:
        await admin.close()
    # Warm up: fault in the first mapped pages.
    warm = await run_producer(
        namesrv, topic, size=args.size, inflight=8, duration_s=1, report_interval_s=60
    )
    phases: list[tuple[Result, bool, str]] = []

    ceiling = (await drive("127.0.0.1", int(echo.booted), frames, args.inflight, d)).labelled(
        f"raw loopback echo ceiling ({args.inflight} in flight)"
    )
    raw, cpu = await _cpu_metered(
        pid,
        drive("127.0.0.1", int(broker.booted), frames, args.inflight, d, count_failures=True),
    )
    phases.append(
        (raw.labelled(f"broker, pipelined raw frames ({args.inflight} in flight)"), True, cpu)
    )

    async def produce(label: str, inflight: int, batch: int = 1) -> tuple[Result, str]:
        return await _cpu_metered(
            pid,
            run_producer(
                namesrv,
                topic,
                size=args.size,
                inflight=inflight,
                duration_s=d,
                batch=batch,
                report_interval_s=args.report_interval,
                label=label,
            ),
        )

    single, cpu = await produce(f"Producer.send ({args.inflight} in flight)", args.inflight)
    phases.append((single, True, cpu))
    batched, cpu = await produce(
        f"Producer.send_batch ({args.batch}/batch, {args.batch_inflight} in flight)",
        args.batch_inflight,
        args.batch,
    )
    phases.append((batched, True, cpu))
    one, cpu = await produce("Producer.send (1 in flight)", 1)
    phases.append((one, False, cpu))
    produced = (
        warm.messages
        + raw.requests
        - raw.failures
        + single.messages
        + batched.messages
        + one.messages
    )
    consumed, cpu = await _cpu_metered(
        pid,
        run_consumer(
            namesrv,
            topic,
            "benchmark_consumer",
            duration_s=max(60.0, 4 * d),
            expect=produced,
            report_interval_s=args.report_interval,
            label=f"PushConsumer catch-up of {produced:,} (latency: born->consumed)",
        ),
    )
    phases.append((consumed, False, cpu))
    echo_one = (await drive("127.0.0.1", int(echo.booted), frames, 1, d)).labelled(
        "raw loopback echo ceiling (1 in flight)"
    )
    print(f"\n== rocketpy benchmark: {args.size} B messages, ASYNC_FLUSH, one broker ==")
    _line(ceiling, args.size)
    _line(echo_one, args.size)
    for res, vs_ceiling, cpu in phases:
        _line(res, args.size, ceiling if vs_ceiling else None, cpu)
    print(f"  received {consumed.messages:,} of {produced:,} acknowledged messages")
    if args.timer_count > 0:
        late = await run_timer(
            namesrv, "BenchmarkSuiteTimer", "benchmark_timer_consumer", count=args.timer_count,
            delay_s=3.0, inflight=args.inflight,
        )  # fmt: skip
        print(
            f"  timer: {late.messages:,} of {args.timer_count:,} messages due 3 s after their send"
            f" arrived late by p50 {late.pct(0.5) / 1000:.0f} ms, p99 "
            f"{late.pct(0.99) / 1000:.0f} ms (timerPrecisionMs 1000)"
        )
    print(f"  broker after run: {memory_summary(pid)}")
    if args.soak:
        await _soak(args, namesrv, pid)


async def _soak(args: argparse.Namespace, namesrv: str, pid: int) -> None:
    """Produce for ``--soak`` seconds sampling the broker's RSS: it must stay flat."""
    samples: list[float] = []
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            samples.append(rss_mb(pid, "RssAnon"))
            try:
                async with asyncio.timeout(10):
                    await stop.wait()
            except TimeoutError:
                pass

    sampler = asyncio.create_task(sample())
    try:
        await run_producer(
            namesrv,
            args.topic,
            size=args.size,
            inflight=args.inflight,
            duration_s=args.soak,
            report_interval_s=60,
            label="soak",
        )
    finally:
        stop.set()
        await sampler
    first = samples[: max(1, len(samples) // 10)]
    last = samples[-max(1, len(samples) // 10) :]
    print(
        f"  soak {args.soak:.0f} s: broker anon RSS first {min(first):.1f}-{max(first):.1f} MB, "
        f"last {min(last):.1f}-{max(last):.1f} MB, max {max(samples):.1f} MB"
    )


def main(argv: list[str] | None = None) -> int:
    """``make bench``: the suite in a throwaway directory."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.bench_suite", description=__doc__)
    # The suite creates its own topic with 8 queues (BenchmarkTest has 1,024).
    parser.add_argument("-t", "--topic", default="BenchmarkSuite")
    add_load_arguments(parser, batch=32)
    parser.add_argument("--batch-inflight", type=int, default=8)
    parser.add_argument("--soak", type=float, default=0.0, help="extra soak seconds (RSS)")
    parser.add_argument("--timer-count", type=int, default=2000, help="timer messages (0: none)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-") as tmp:
        run_loop(lambda: suite(args, Path(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
