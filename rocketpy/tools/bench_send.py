"""``make bench-send``: the broker's send path beside a reference hot path, in one run.

Owns: the command line ``python -m rocketpy.tools.bench_send [--reference PATH]``. It starts a
NameServer and an ASYNC_FLUSH broker as child processes and drives the broker with pre-encoded
SEND_MESSAGE_V2 frames (singles) and SEND_BATCH_MESSAGE frames (batches) kept ``--inflight`` deep
on one connection, then singles at 1 in flight; each phase prints msg/s, MB/s, p50/p99 and the
broker's CPU per message (from ``/proc``, steady even when the machine's speed drifts). With
``--reference`` it runs that script (a minimal broker hot path with its own client, such as the
repository's ``../shared/perf/mini_broker.py``) for singles and batches before and after the
broker phases, and prints each broker figure as a ratio to the mean of the two reference runs.
It ends with issue 23's aims for the send path (rate ratios, 1-in-flight p50, idle RSS), each
met or not.
Must not: import or ship the reference (it is only executed, by path), be used as a test, or talk
to anything but loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rocketpy.tools.benchmark import send_frames
from rocketpy.tools.children import spawn_namesrv_and_broker, stop
from rocketpy.tools.loadgen import Latencies, child_pids, cpu_seconds, pipelined, rss_mb

_REF_LINE = re.compile(r"median=([\d.]+)k msg/s .*server_cpu=([\d.]+)us/msg")


@dataclass(slots=True)
class Figure:
    """One phase: messages per second, server CPU microseconds per message, latencies."""

    label: str
    rate: float
    cpu_us: float
    latencies: Latencies | None = None
    failures: int = 0


async def _phase(
    label: str,
    port: int,
    pid: int,
    frames: list[bytes],
    *,
    messages: int,
    batch: int,
    inflight: int,
) -> Figure:
    requests = max(1, messages // batch)
    # Warm-up: the first mapped pages, interpreter caches.
    await pipelined("127.0.0.1", port, frames, min(requests, 2000), inflight)
    cpu0 = cpu_seconds(pid)
    res = await pipelined("127.0.0.1", port, frames, requests, inflight)
    cpu1 = cpu_seconds(pid)
    n = requests * batch
    return Figure(label, n / res.seconds, (cpu1 - cpu0) * 1e6 / n, res.latencies_us, res.failures)


def _reference(path: str, batch: int, args: argparse.Namespace) -> Figure:
    """Run the reference script once (it takes the median of its own ``--reps``)."""
    cmd = [
        sys.executable, path, "--codec", "orjson", "--coalesce", "1", "--batch", str(batch),
        "--size", str(args.size), "--inflight", str(args.inflight),
        "--messages", str(args.messages), "--reps", str(args.reps),
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)  # noqa: S603
    match = _REF_LINE.search(out.stdout)
    if match is None:
        raise RuntimeError(f"reference printed no figure: {out.stdout}{out.stderr}")
    label = f"reference {'singles' if batch == 1 else f'batches of {batch}'}"
    return Figure(label, float(match.group(1)) * 1e3, float(match.group(2)))


def _print(fig: Figure, size: int, ref: Figure | None = None) -> None:
    lat = fig.latencies
    pct = (
        f"p50 {lat.pct(0.5) / 1000:6.3f} ms  p99 {lat.pct(0.99) / 1000:6.3f} ms"
        if lat is not None and lat.count
        else " " * 35
    )
    ratio = ""
    if ref is not None:
        ratio = (
            f"  = {fig.rate / ref.rate:5.2f} x reference rate,"
            f" {fig.cpu_us / ref.cpu_us:5.2f} x its CPU"
        )
    print(
        f"  {fig.label:<38} {fig.rate:>9,.0f} msg/s {fig.rate * size / 1e6:7.2f} MB/s  {pct}"
        f"  CPU {fig.cpu_us:6.2f} us/msg  failed {fig.failures}{ratio}",
        flush=True,
    )


def _mean(a: Figure, b: Figure) -> Figure:
    return Figure(a.label, (a.rate + b.rate) / 2, (a.cpu_us + b.cpu_us) / 2)


async def _broker_phases(args: argparse.Namespace, workdir: Path) -> tuple[list[Figure], float]:
    """The broker's phases and its idle RSS in MB."""
    extra = "".join(f"{kv}\n" for kv in args.broker_conf)
    children = spawn_namesrv_and_broker(
        workdir, f"flushDiskType=ASYNC_FLUSH\nautoCreateTopicEnable=true\n{extra}"
    )
    try:
        broker = children[1]
        pid, port = broker.proc.pid, int(broker.booted)
        await asyncio.sleep(1.0)
        idle_rss = rss_mb(pid)
        children_rss = sum(rss_mb(child) for child in child_pids(pid))
        print(f"broker pid {pid}, idle RSS {idle_rss:.1f} MB"
              + (f" + its index worker {children_rss:.1f} MB" if children_rss else ""),
              flush=True)  # fmt: skip
        idle_rss += children_rss
        figs = []
        singles = send_frames(args.topic, args.size, 4096)
        batches = send_frames(args.topic, args.size, 512, args.batch)
        for _ in range(args.reps):
            figs.append(
                await _phase(
                    "broker singles",
                    port,
                    pid,
                    singles,
                    messages=args.messages,
                    batch=1,
                    inflight=args.inflight,
                )
            )
        for _ in range(args.reps):
            figs.append(
                await _phase(
                    f"broker batches of {args.batch}",
                    port,
                    pid,
                    batches,
                    messages=args.messages,
                    batch=args.batch,
                    inflight=args.inflight,
                )
            )
        figs.append(
            await _phase(
                "broker singles, 1 in flight",
                port,
                pid,
                singles,
                messages=min(args.messages, 20_000),
                batch=1,
                inflight=1,
            )
        )
        print(f"broker RSS after the run {rss_mb(pid):.1f} MB", flush=True)
        return figs, idle_rss
    finally:
        for child in reversed(children):
            stop(child)


def _median(figs: list[Figure], label: str) -> Figure:
    """The run of median rate (its latencies), with the median CPU of all runs."""
    same = [f for f in figs if f.label == label]
    mid = sorted(same, key=lambda f: f.rate)[len(same) // 2]
    return dataclasses.replace(mid, cpu_us=statistics.median(f.cpu_us for f in same))


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.bench_send", description=__doc__)
    parser.add_argument("--reference", default=None, help="path of a reference hot-path script")
    parser.add_argument("-t", "--topic", default="BenchmarkTest")
    parser.add_argument("-s", "--size", type=int, default=128, help="body bytes")
    parser.add_argument("-w", "--inflight", type=int, default=64)
    parser.add_argument("-b", "--batch", type=int, default=32)
    parser.add_argument("--messages", type=int, default=200_000, help="messages per phase")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--broker-conf", action="append", default=[], metavar="KEY=VALUE",
        help="a broker configuration line (repeatable), e.g. messageIndexWorkerEnable=true",
    )  # fmt: skip
    args = parser.parse_args(argv)
    print(
        f"send path: {args.size} B bodies, {args.inflight} in flight, {args.messages:,} "
        f"messages per phase, median of {args.reps}",
        flush=True,
    )
    before: list[Figure] = []
    if args.reference:
        before = [_reference(args.reference, 1, args), _reference(args.reference, args.batch, args)]
        for fig in before:
            _print(fig, args.size)
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-send-") as tmp:
        figs, idle_rss = asyncio.run(_broker_phases(args, Path(tmp)))
    refs: dict[int, Figure] = {}
    if args.reference:
        after = [_reference(args.reference, 1, args), _reference(args.reference, args.batch, args)]
        for fig in after:
            _print(fig, args.size)
        refs = {1: _mean(before[0], after[0]), args.batch: _mean(before[1], after[1])}
    singles = _median(figs, "broker singles")
    batches = _median(figs, f"broker batches of {args.batch}")
    print("results (broker medians; ratios to the mean of the reference runs before and after):")
    _print(singles, args.size, refs.get(1))
    _print(batches, args.size, refs.get(args.batch))
    _print(figs[-1], args.size)
    refs_pair = (refs[1], refs[args.batch]) if refs else None
    _print_aims((singles, batches, figs[-1]), idle_rss, refs_pair)


def _print_aims(
    broker: tuple[Figure, Figure, Figure], idle_rss: float, refs: tuple[Figure, Figure] | None
) -> None:
    """Issue 23's aims for the send path, each with its figure and whether it is met:
    ``broker`` is (singles, batches, singles at 1 in flight), ``refs`` the reference's
    (singles, batches)."""
    singles, batches, one = broker
    aims: list[tuple[str, float, bool]] = []
    if refs is not None:
        single_ratio = singles.rate / refs[0].rate
        batch_ratio = batches.rate / refs[1].rate
        aims += [
            ("singles >= 0.5 x reference rate", single_ratio, single_ratio >= 0.5),
            ("batches >= 0.7 x reference rate", batch_ratio, batch_ratio >= 0.7),
        ]
    if one.latencies is not None and one.latencies.count:
        p50_ms = one.latencies.pct(0.5) / 1000
        aims.append(("1 in flight p50 <= 0.25 ms", p50_ms, p50_ms <= 0.25))
    aims.append(("idle RSS < 60 MB", idle_rss, idle_rss < 60))
    print("aims:")
    for label, value, met in aims:
        print(f"  {label:<34} {value:8.2f}  {'met' if met else 'NOT met'}", flush=True)


if __name__ == "__main__":
    main()
