"""``make bench-features`` (``python -m rocketpy.tools.bench_features``): the message features
beside plain sends and pulls measured in the same run.

Owns: starting a NameServer and a broker (ASYNC_FLUSH, ``messageDelayLevel`` from
``--delay-levels``) as child processes and running, in one run, each phase against its
reference: (1) plain ``Producer.send`` then half + commit through ``TransactionProducer`` (every
committed message then consumed back); (2) a PushConsumer catching up ``--consume`` messages
then a SimpleConsumer POP-receiving and acking the same messages with ``--pop-loops`` receive
loops; (3) ``--timers`` timer messages due ``--timer-delay`` seconds after their send: send rate,
broker RSS before, with every timer pending and after delivery, and the delivery lateness;
(4) ``--per-level`` messages on every delay level at once, each level's lateness. Each figure
comes with the broker's CPU per message (``/proc``) and its ratio to the reference phase: this
machine's speed drifts, so those are what count. Mirrors no upstream class (upstream's
``example/benchmark`` has one program per feature). Must not: be used as a test (numbers vary
by machine), or talk to anything but loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from rocketpy.broker.config import DEFAULT_DELAY_LEVELS
from rocketpy.broker.schedule import parse_delay_levels
from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.tools.bench_delay import DelayRun, held_back, run_delay_levels
from rocketpy.tools.bench_pop import run_pop_consumer
from rocketpy.tools.bench_timer import run_timer
from rocketpy.tools.bench_txn import await_arrivals, run_transactions
from rocketpy.tools.benchmark import run_consumer, run_loop, run_producer
from rocketpy.tools.children import Child, spawn_namesrv_and_broker, stop
from rocketpy.tools.loadgen import Result, cpu_seconds, rss_mb

T = TypeVar("T")

#: Upstream's 18 levels (1 s .. 2 h) scaled down so that all of them fire within 30 s.
BENCH_DELAY_LEVELS = "1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 12s 14s 16s 18s 20s 22s 26s 30s"
QUICK_DELAY_LEVELS = "1s 1s 1s 1s 1s 1s 2s 2s 2s 2s 2s 2s 3s 3s 3s 3s 3s 3s"
#: A delay level counts as held back when its p99 lateness is above this.
HELD_BACK_MS = 1000.0
_BODY = b"rocketpy-feature-benchmark-"


class _Meter:
    """The broker's CPU seconds (``/proc``) across one phase."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start = cpu_seconds(pid)

    def per_msg_us(self, messages: int) -> float:
        """Broker CPU microseconds per message since this meter was made."""
        return (cpu_seconds(self.pid) - self.start) * 1e6 / max(1, messages)


async def _metered(
    pid: int, run: Callable[[], Awaitable[T]], count: Callable[[T], int]
) -> tuple[T, float]:
    meter = _Meter(pid)
    got = await run()
    return got, meter.per_msg_us(count(got))


def _ms(us: float) -> str:
    return f"{us / 1000:8.3f} ms"


def _vs(rate: float, cpu_us: float, ref: Result, ref_cpu_us: float, name: str) -> str:
    """Rate and broker CPU per message as ratios to a reference phase."""
    return (
        f"   {rate / max(ref.message_rate, 1e-9):6.1%} of {name},"
        f" {cpu_us / max(ref_cpu_us, 1e-9):5.2f}x its CPU/msg"
    )


def _rate_line(
    res: Result, cpu_us: float, ref: tuple[Result, float] | None = None, ref_name: str = ""
) -> str:
    ratio = _vs(res.message_rate, cpu_us, *ref, ref_name) if ref else ""
    return (
        f"  {res.label:<52} {res.message_rate:>9,.0f} msg/s   p50 {_ms(res.pct(0.5))}"
        f"   p99 {_ms(res.pct(0.99))}   failed {res.failures}   broker CPU/msg {cpu_us:7.1f} us"
        f"{ratio}"
    )


class _Report:
    """Lines of the closing summary, printed together once every phase ran."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.idle_cpu = 0.0  # the idle broker's CPU seconds per second
        self.plain_cpu = 0.0  # broker CPU microseconds per plain send

    def idle_us(self, seconds: float, messages: int) -> float:
        """What ``seconds`` of the idle broker's ticking add per message."""
        return self.idle_cpu * seconds * 1e6 / max(1, messages)

    def add(self, line: str) -> None:
        self.lines.append(line)
        print(f"# {line.strip()}", flush=True)


async def _sends(
    args: argparse.Namespace, namesrv: str, pid: int, report: _Report
) -> tuple[Result, int]:
    """Phase 1: plain sends, then half + commit; every committed message consumed back.
    Returns the plain-send run (the reference of later phases) and the messages in the topic."""
    d, w, body = args.duration, args.inflight, (_BODY * (args.size // len(_BODY) + 1))[: args.size]
    plain, plain_cpu = await _metered(
        pid,
        lambda: run_producer(
            namesrv, args.topic, size=args.size, inflight=w, duration_s=d,
            report_interval_s=args.report_interval, label=f"plain Producer.send ({w} in flight)",
        ),
        lambda r: r.messages,
    )  # fmt: skip
    (txn, committed), txn_cpu = await _metered(
        pid,
        lambda: run_transactions(
            namesrv, f"{args.topic}Txn", body=body, inflight=w, duration_s=d,
            label=f"TransactionProducer half + commit ({w} in flight)",
        ),
        lambda r: r[0].messages,
    )  # fmt: skip
    arrived, unexpected = await await_arrivals(
        namesrv, f"{args.topic}Txn", "benchmark_txn_check", committed, deadline_s=args.wait
    )
    report.add("1. sends: plain vs transactional (half message, local COMMIT, END_TRANSACTION)")
    report.add(_rate_line(plain, plain_cpu))
    report.plain_cpu = plain_cpu
    report.add(_rate_line(txn, txn_cpu, (plain, plain_cpu), "plain sends"))
    report.add(
        f"  committed {len(committed):,}: arrived {arrived:,}, missing {len(committed) - arrived}"
        f", not committed but delivered {unexpected}"
    )
    return plain, plain.messages


async def _consumption(
    args: argparse.Namespace, namesrv: str, pid: int, report: _Report, in_topic: int
) -> None:
    """Phase 2: a PushConsumer, then a SimpleConsumer (POP + ack) over the same messages."""
    m = min(args.consume, in_topic) if args.consume > 0 else in_topic
    push, push_cpu = await _metered(
        pid,
        lambda: run_consumer(
            namesrv, args.topic, "benchmark_feature_push", duration_s=args.wait, expect=m,
            report_interval_s=args.report_interval,
            label=f"PushConsumer pull of {m:,} (from start)",
        ),
        lambda r: min(r.messages, m),
    )  # fmt: skip
    pop, pop_cpu = await _metered(
        pid,
        lambda: run_pop_consumer(
            namesrv, args.topic, "benchmark_feature_pop", duration_s=args.wait,
            inflight=args.pop_loops, batch=args.pop_batch, expect=m,
            report_interval_s=args.report_interval,
            label=f"SimpleConsumer POP receive+ack of {m:,} ({args.pop_loops} loops)",
        ),
        lambda r: min(r.messages, m),
    )  # fmt: skip
    report.add(f"2. consumption of the same {m:,} messages ({args.size} B) by two new groups")
    report.add(_rate_line(push, push_cpu) + "   latency: born->consumed (the backlog's age)")
    report.add(_rate_line(pop, pop_cpu, (push, push_cpu), "push") + "   latency: receive+ack")
    report.add(
        f"  pulled {min(push.messages, m):,} of {m:,} (missing {max(m - push.messages, 0)}), "
        f"popped+acked {min(pop.messages, m):,} of {m:,} (missing {max(m - pop.messages, 0)})"
    )


async def _timers(
    args: argparse.Namespace, namesrv: str, pid: int, report: _Report, plain: Result
) -> None:
    """Phase 3: ``--timers`` pending timer messages: send rate, RSS, lateness."""
    n = args.timers
    delay = args.timer_delay
    if delay is None:  # sending must finish first: 1.5x the time as many plain sends took
        delay = math.ceil(1.5 * n / max(plain.message_rate, 1.0)) + 5
    at: dict[str, float] = {}
    meter = _Meter(pid)

    def on_sending() -> None:  # the consumer started: RSS and CPU of the sends from here
        nonlocal meter
        at["rss0"], at["anon0"], meter = rss_mb(pid), rss_mb(pid, "RssAnon"), _Meter(pid)
        at["cpu0"], at["t0"] = meter.start, time.monotonic()

    def on_sent(sent: int, delivered: int, seconds: float) -> None:
        at.update(
            sent=sent, pending=sent - delivered, seconds=seconds, rss=rss_mb(pid),
            anon=rss_mb(pid, "RssAnon"), cpu=meter.per_msg_us(sent),
        )  # fmt: skip

    late = await run_timer(
        namesrv, f"{args.topic}Timer", "benchmark_feature_timer", count=n, delay_s=delay,
        inflight=args.inflight, wait_s=args.wait, label="timer lateness",
        on_sending=on_sending, on_sent=on_sent,
    )  # fmt: skip
    rss2, anon2 = rss_mb(pid), rss_mb(pid, "RssAnon")
    all_in = (cpu_seconds(pid) - at["cpu0"]) * 1e6 / max(late.messages, 1)
    idle = report.idle_us(time.monotonic() - at["t0"], late.messages)
    sent, secs, rss0, rss1 = int(at.get("sent", 0)), at.get("seconds", 0.0), at["rss0"], at["rss"]
    rate = sent / secs if secs else 0.0
    report.add(f"3. {n:,} timer messages due {delay} s after their send (timerPrecisionMs 1000)")
    report.add(
        f"  timer sends {rate:>9,.0f} msg/s   broker CPU/msg {at['cpu']:7.1f} us"
        + _vs(rate, at["cpu"], plain, report.plain_cpu, "plain sends")
        + f"   sent {sent:,} in {secs:.2f} s, {int(at['pending']):,} pending when sending ended"
    )
    report.add(
        f"  broker RSS before {rss0:.1f} MB, timers pending {rss1:.1f} MB ({rss1 - rss0:+.1f}),"
        f" after delivery {rss2:.1f} MB; anon {at['anon0']:.1f} -> {at['anon']:.1f} "
        f"({at['anon'] - at['anon0']:+.1f}) -> {anon2:.1f} MB"
    )
    report.add(
        f"  lateness p50 {late.pct(0.5) / 1000:.0f} ms, p99 {late.pct(0.99) / 1000:.0f} ms, max "
        f"{late.latencies_us.max / 1000:.0f} ms; delivered {late.messages:,} of {sent:,}, "
        f"missing {max(sent - late.messages, 0)}   (arrival - TIMER_DELIVER_MS)"
    )
    report.add(
        f"  broker CPU/msg all-in over the phase (send, timer wheel, delivery, pull) {all_in:.1f}"
        f" us, of which the idle broker's ticking ~{idle:.1f} us"
    )


async def _delay_levels(
    args: argparse.Namespace,
    namesrv: str,
    pid: int,
    report: _Report,
    *,
    delays: dict[int, int],
    plain: Result,
) -> DelayRun:
    """Phase 4: every delay level busy at once."""
    meter, at = _Meter(pid), {}

    def on_sending() -> None:  # the consumer started: the sends' CPU from here
        nonlocal meter
        meter = _Meter(pid)
        at["cpu0"], at["t0"] = meter.start, time.monotonic()

    def on_sent(run: DelayRun) -> None:
        at["cpu"] = meter.per_msg_us(run.sent)

    run = await run_delay_levels(
        namesrv, f"{args.topic}Delay", "benchmark_feature_delay", delays_ms=delays,
        per_level=args.per_level, inflight=args.inflight, wait_s=args.wait,
        on_sending=on_sending, on_sent=on_sent,
    )  # fmt: skip
    all_in = (cpu_seconds(pid) - at["cpu0"]) * 1e6 / max(run.received, 1)
    idle = report.idle_us(time.monotonic() - at["t0"], run.received)
    rate = run.sent / run.send_seconds if run.send_seconds else 0.0
    report.add(
        f"4. delay levels, all {len(delays)} busy: {args.per_level:,} messages per level sent "
        f"interleaved, {run.sent:,} in {run.send_seconds:.2f} s (failed {run.failed})"
    )
    report.add(
        f"  delayed sends {rate:>9,.0f} msg/s   broker CPU/msg {at['cpu']:7.1f} us"
        + _vs(rate, at["cpu"], plain, report.plain_cpu, "plain sends")
    )
    report.add(
        f"  broker CPU/msg all-in over the phase (send, schedule queue, re-put, pull) "
        f"{all_in:.1f} us, of which the idle broker's ticking ~{idle:.1f} us"
    )
    report.add(
        f"  broker messageDelayLevel for this bench: {args.delay_levels}"
        f" (upstream: {DEFAULT_DELAY_LEVELS}, scaled down)"
    )
    for level, s in sorted(run.levels.items()):
        report.add(
            f"  level {level:>2} ({s.delay_ms / 1000:>4.0f} s): delivered {s.received:,} of "
            f"{s.sent:,}, missing {s.sent - s.received}, early {s.early}, lateness p50 "
            f"{s.late.pct(0.5) / 1000:5.0f} ms p99 {s.late.pct(0.99) / 1000:5.0f} ms max "
            f"{s.late.max / 1000:5.0f} ms, last at {s.last_s:5.1f} s"
        )
    slow = held_back(run, HELD_BACK_MS)
    report.add(
        f"  levels held back (p99 lateness over {HELD_BACK_MS:.0f} ms or missing): "
        f"{', '.join(map(str, slow)) if slow else 'none'}"
    )
    return run


async def features(args: argparse.Namespace, workdir: Path) -> None:
    """Every phase against a NameServer and a broker started under ``workdir``."""
    delays = parse_delay_levels(args.delay_levels)
    conf = (
        "flushDiskType=ASYNC_FLUSH\nautoCreateTopicEnable=true\ndefaultTopicQueueNums=8\n"
        f"messageDelayLevel={args.delay_levels}\n"
    )
    children = spawn_namesrv_and_broker(workdir, conf)
    try:
        await _run(args, f"127.0.0.1:{children[0].booted}", children[1], delays)
    finally:
        for child in reversed(children):
            stop(child)


async def _run(
    args: argparse.Namespace, namesrv: str, broker: Child, delays: dict[int, int]
) -> None:
    pid, began, report = broker.proc.pid, time.monotonic(), _Report()
    admin = AdminClient(namesrv)
    try:  # 8 queues, as an operator creates a topic (a send would auto-create 4)
        for topic in (args.topic, f"{args.topic}Txn"):
            await admin.create_topic(f"127.0.0.1:{broker.booted}", TopicSpec(topic=topic))
    finally:
        await admin.close()
    await run_producer(  # warm-up: fault in the first mapped pages, start the send path
        namesrv, f"{args.topic}Warm", size=args.size, inflight=8, duration_s=1,
        report_interval_s=60,
    )  # fmt: skip
    idle = _Meter(pid)
    idle_s = 1.0 if args.quick else 3.0
    await asyncio.sleep(idle_s)
    report.idle_cpu = (cpu_seconds(pid) - idle.start) / idle_s
    plain, in_topic = await _sends(args, namesrv, pid, report)
    await _consumption(args, namesrv, pid, report, in_topic)
    if args.timers > 0:
        await _timers(args, namesrv, pid, report, plain)
    if args.per_level > 0:
        await _delay_levels(args, namesrv, pid, report, delays=delays, plain=plain)
    print(
        f"\n== rocketpy feature benchmark: one broker (ASYNC_FLUSH), {args.size} B bodies, "
        f"{args.inflight} in flight, {time.monotonic() - began:.0f} s; idle broker "
        f"{report.idle_cpu:.1%} of a core ==",
        flush=True,
    )
    for line in report.lines:
        print(line if line.startswith("  ") else f"{line}")
    sys.stdout.flush()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rocketpy.tools.bench_features", description=__doc__)
    p.add_argument("-t", "--topic", default="BenchmarkFeatures")
    p.add_argument("-s", "--size", type=int, default=128, help="body bytes of plain/txn sends")
    p.add_argument("-w", "--inflight", type=int, default=64, help="sends outstanding")
    p.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per send phase")
    p.add_argument(
        "--consume", type=int, default=0, help="messages each consumer takes (0: all sent)"
    )
    p.add_argument("--pop-loops", type=int, default=8, help="concurrent POP receive loops")
    p.add_argument("--pop-batch", type=int, default=32, help="messages per receive (<= 32)")
    p.add_argument("--timers", type=int, default=100_000, help="timer messages (0: skip)")
    p.add_argument(
        "--timer-delay", type=float, default=None,
        help="seconds after its send each timer is due (default: 1.5x the time as many plain "
        "sends took, + 5 s, so that sending finishes first)",
    )  # fmt: skip
    p.add_argument("--delay-levels", default=BENCH_DELAY_LEVELS, help="the broker's levels")
    p.add_argument("--per-level", type=int, default=2000, help="messages per delay level (0: skip)")
    p.add_argument("--wait", type=float, default=60.0, help="deadline of each wait (s)")
    p.add_argument("--report-interval", type=float, default=5.0)
    p.add_argument("--quick", action="store_true", help="a tiny smoke run")
    return p


def main(argv: list[str] | None = None) -> int:
    """``make bench-features``: the run in a throwaway directory."""
    args = _parser().parse_args(argv)
    if args.quick:
        args.duration, args.inflight, args.consume = 1.0, 8, 300
        args.pop_loops, args.timers, args.timer_delay = 4, 300, 3.0
        args.per_level, args.wait, args.report_interval = 5, 30.0, 1.0
        if args.delay_levels == BENCH_DELAY_LEVELS:
            args.delay_levels = QUICK_DELAY_LEVELS
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-features-") as tmp:
        run_loop(lambda: features(args, Path(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
