"""The benchmark's /proc readers and latency histogram."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy.tools.benchmark import send_frames
from rocketpy.tools.loadgen import Latencies, cpu_seconds, pipelined, serve_echo


def test_cpu_seconds_counts_a_busy_process_and_not_a_gone_one() -> None:
    """1. Read this process's CPU seconds, burn ~0.3 s of CPU, read again. 2. Read the CPU of a
    child that has exited and been reaped.
    Expected: the second reading grew by roughly what was burnt; a gone pid reads 0."""
    before = cpu_seconds(os.getpid())
    spent = time.process_time()
    while time.process_time() - spent < 0.3:
        sum(range(1000))
    grown = cpu_seconds(os.getpid()) - before
    assert 0.2 <= grown < 5.0
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cpu_seconds(gone.pid) == 0.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 5e7, allow_nan=False), min_size=1, max_size=300),
    st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]),
)
def test_latencies_percentiles_are_within_a_bucket_of_the_exact_ones(
    samples: list[float], q: float
) -> None:
    """1. Count random latencies (0 to 50 s, in microseconds) in two halves, the second one by
    one in its own histogram, then merged. 2. Ask for a
    percentile. Expected: the exact percentile of the sorted samples, rounded down to its
    bucket: at most 0.4 % (and 1 us) below, never above; count, sum and max are exact."""
    lat = Latencies(samples[: len(samples) // 2])
    rest = Latencies()
    for us in samples[len(samples) // 2 :]:
        rest.add(us)
    lat.merge(rest)
    ordered = sorted(samples)
    exact = ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    got = lat.pct(q)
    assert got <= exact
    assert exact - got <= max(exact * 2**-8, 1.0)
    assert (len(lat), lat.max) == (len(samples), max(samples))
    assert abs(lat.total - sum(samples)) <= 1e-6 * max(1.0, sum(samples))


def test_latencies_of_a_long_run_keep_few_buckets() -> None:
    """1. Count a million latencies spread over 1 us to 10 s. Expected: a few thousand buckets
    at most, and no percentile of an empty histogram (0)."""
    lat = Latencies(float(1 + (i * 7919) % 10_000_000) for i in range(1_000_000))
    assert len(lat._counts) < 12_000
    assert Latencies().pct(0.5) == 0.0


async def test_pipelined_counts_every_reply_and_its_code() -> None:
    """1. Start the echo server (its "replies" are the requests: code 310). 2. Drive 1,000
    requests cycled from 100 distinct SEND_MESSAGE_V2 frames, 16 in flight.
    Expected: 1,000 replies, each timed by its opaque, each counted as a failure (code != 0)."""
    server, port = await serve_echo()
    try:
        async with asyncio.timeout(30):
            res = await pipelined("127.0.0.1", port, send_frames("T", 64, 100), 1000, 16)
    finally:
        server.close()
        await server.wait_closed()
    assert res.requests == 1000
    assert res.latencies_us.count == 1000
    assert res.failures == 1000
