"""``make bench-controller``: DLedger writes per second and leader failover time, in process.

Owns: one benchmark run. It starts a 3-member :class:`LocalGroup` on loopback (real sockets,
real fsynced logs in a temporary directory), waits for a leader, then runs N concurrent
proposers against the leader for a fixed time and reports committed-and-applied writes/s and
the p50/p99 latency of ``propose``; finally it stops the leader and reports how long the two
others take to agree on a new one. Must not: be used as a test (numbers vary by machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import structlog

from rocketpy.tools.dledger_group import LocalGroup


@dataclass(frozen=True, slots=True)
class BenchResult:
    """What one run measured."""

    proposers: int
    payload_bytes: int
    writes: int
    seconds: float
    writes_per_s: float
    p50_ms: float
    p99_ms: float
    failover_s: float
    heartbeat_interval_ms: int
    election_timeout_ms: int


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def run_bench(
    *,
    proposers: int = 64,
    duration_s: float = 5.0,
    payload_bytes: int = 128,
    heartbeat_interval_ms: int = 100,
    election_timeout_ms: int = 300,
    base_dir: Path | None = None,
) -> BenchResult:
    """Run one benchmark (see the module docstring) and return its numbers."""
    with tempfile.TemporaryDirectory(prefix="bench-dledger-", dir=base_dir) as tmp:
        group = LocalGroup(
            Path(tmp),
            heartbeat_interval_ms=heartbeat_interval_ms,
            election_timeout_ms=election_timeout_ms,
        )
        await group.start()
        try:
            leader = await group.wait_leader(timeout_s=10.0)
            node = leader.running
            payload = b"x" * payload_bytes
            latencies: list[float] = []
            deadline = time.monotonic() + duration_s

            async def proposer() -> None:
                while time.monotonic() < deadline:
                    started = time.perf_counter()
                    await node.propose(payload, timeout_s=5.0)
                    latencies.append(time.perf_counter() - started)

            started = time.monotonic()
            async with asyncio.TaskGroup() as tg:
                for _ in range(proposers):
                    tg.create_task(proposer())
            elapsed = time.monotonic() - started
            stopped = time.monotonic()
            await group.stop_member(leader.node_id)
            await group.wait_leader(timeout_s=10.0, exclude=leader.node_id)
            failover = time.monotonic() - stopped
        finally:
            await group.close()
    latencies.sort()
    return BenchResult(
        proposers=proposers,
        payload_bytes=payload_bytes,
        writes=len(latencies),
        seconds=round(elapsed, 3),
        writes_per_s=round(len(latencies) / elapsed, 1),
        p50_ms=round(_percentile(latencies, 0.50) * 1000, 2),
        p99_ms=round(_percentile(latencies, 0.99) * 1000, 2),
        failover_s=round(failover, 3),
        heartbeat_interval_ms=heartbeat_interval_ms,
        election_timeout_ms=election_timeout_ms,
    )


def main(argv: list[str] | None = None) -> int:
    """Parse options, run, print a summary line (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(prog="bench_dledger", description=__doc__)
    parser.add_argument("--proposers", type=int, default=64)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of load")
    parser.add_argument("--payload", type=int, default=128, help="bytes per entry")
    parser.add_argument("--heartbeat-ms", type=int, default=100)
    parser.add_argument("--election-timeout-ms", type=int, default=300)
    parser.add_argument("--json", action="store_true", help="also print the result as JSON")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    result = asyncio.run(
        run_bench(
            proposers=args.proposers,
            duration_s=args.duration,
            payload_bytes=args.payload,
            heartbeat_interval_ms=args.heartbeat_ms,
            election_timeout_ms=args.election_timeout_ms,
        )
    )
    print(
        f"dledger 3 members, {result.proposers} proposers, {result.payload_bytes} B entries:"
        f" {result.writes_per_s:.0f} writes/s ({result.writes} in {result.seconds}s),"
        f" p50 {result.p50_ms} ms, p99 {result.p99_ms} ms;"
        f" leader failover {result.failover_s * 1000:.0f} ms"
        f" (heartbeat {result.heartbeat_interval_ms} ms,"
        f" election timeout {result.election_timeout_ms} ms)"
    )
    if args.json:
        print(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
