"""``make bench-ha-classic``: what classic replication costs a producer, in one run.

Owns: starting, for each of 2m-noslave, 2m-2s-async and 2m-2s-sync, a NameServer and the
layout's ``broker-a`` group (master, and its slave where the layout has one) through
:mod:`rocketpy.tools.cluster_classic`, producing to it with the same message size, inflight
and duration, stopping it, and printing msg/s, p50 and p99 per layout with the ratios sync/async
and async/noslave (the in-run baseline: figures from one machine at one moment are only
comparable to each other). Must not: be used as a test, or import daemon packages.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.tools.benchmark import run_producer
from rocketpy.tools.cluster import launch, stop
from rocketpy.tools.cluster_classic import LAYOUTS, layout_specs
from rocketpy.tools.loadgen import Result

TOPIC = "BenchHaClassic"
#: Small store files: the run writes little and must not preallocate 1 GiB per broker.
STORE_KEYS = {
    "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": "600000",
}


async def _create_topic(namesrv: str, master: str, queues: int) -> None:
    admin = AdminClient(namesrv)
    try:
        spec = TopicSpec(topic=TOPIC, read_queue_nums=queues, write_queue_nums=queues)
        await admin.create_topic(master, spec)
    finally:
        await admin.close()


def bench_layout(layout: str, workdir: Path, args: argparse.Namespace) -> Result:
    """Start ``layout``'s broker-a group, produce for ``args.duration`` seconds, stop it.

    Raises:
        RuntimeError: a daemon did not boot.
    """
    directory = workdir / layout
    specs = [
        s
        for s in layout_specs(layout, directory / "data", base_port=0, overrides=STORE_KEYS)
        if s.role == "namesrv" or s.name in ("broker-a", "broker-a-s")
    ]
    members = launch(directory, specs, "python -m rocketpy.tools.cluster stop --dir ...")
    if members is None:
        raise RuntimeError(f"{layout} did not start; logs under {directory / 'logs'}")
    try:
        namesrv = members[0].address
        master = next(m.address for m in members if m.name == "broker-a")
        asyncio.run(_create_topic(namesrv, master, args.queues))
        print(f"--- {layout}: {', '.join(m.name for m in members[1:])}", flush=True)
        return asyncio.run(
            run_producer(
                namesrv,
                TOPIC,
                size=args.size,
                inflight=args.inflight,
                duration_s=args.duration,
                report_interval_s=args.duration,
                label=layout,
            )
        )
    finally:
        stop(directory)


def _ratio(a: Result, b: Result) -> float:
    return a.message_rate / b.message_rate if b.message_rate else 0.0


def print_report(results: dict[str, Result], args: argparse.Namespace) -> None:
    """The per-layout table and the two ratios."""
    print(f"\nclassic HA producer benchmark: {args.size} B bodies, inflight {args.inflight},"
          f" {args.duration:.0f} s per layout, one master (+ one slave)")  # fmt: skip
    print(f"{'layout':<14} {'msg/s':>10} {'p50 ms':>9} {'p99 ms':>9} {'failed':>7}")
    for layout, r in results.items():
        print(
            f"{layout:<14} {r.message_rate:>10,.0f} {r.pct(0.5) / 1000:>9.3f}"
            f" {r.pct(0.99) / 1000:>9.3f} {r.failures:>7}"
        )
    if "2m-2s-sync" in results and "2m-2s-async" in results:
        ratio = _ratio(results["2m-2s-sync"], results["2m-2s-async"])
        print(f"sync/async msg/s ratio:    {ratio:.2f} (aim >= 0.75)")
    if "2m-2s-async" in results and "2m-noslave" in results:
        ratio = _ratio(results["2m-2s-async"], results["2m-noslave"])
        print(f"async/noslave msg/s ratio: {ratio:.2f}")
    print("(figures are noisy on a shared machine; compare the ratios, not the absolute rates)")


def main(argv: list[str] | None = None) -> int:
    """``python -m rocketpy.tools.bench_ha_classic [--duration S] [--size B] [--inflight N]``."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.bench_ha_classic", description=__doc__)
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per layout")
    parser.add_argument("-s", "--size", type=int, default=128, help="body bytes")
    parser.add_argument("-w", "--inflight", type=int, default=64, help="sends outstanding")
    parser.add_argument("-q", "--queues", type=int, default=8, help="queues of the topic")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="comma-separated")
    args = parser.parse_args(argv)
    results: dict[str, Result] = {}
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-ha-") as tmp:
        for layout in [x for x in args.layouts.split(",") if x]:
            results[layout] = bench_layout(layout, Path(tmp), args)
    print_report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
