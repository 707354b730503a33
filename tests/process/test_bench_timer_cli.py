"""``python -m rocketpy.tools.benchmark timer`` against real daemons."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cluster import start_cluster, unique
from tests.helpers.processes import REPO, bin_env

pytestmark = pytest.mark.process


def test_benchmark_timer_reports_lateness(tmp_path: Path) -> None:
    """1. Start mqnamesrv + mqbroker (default timerPrecisionMs=1000). 2. ``benchmark timer``:
    300 messages due 2 s after their send, 8 in flight.
    Expected: the summary line reports all 300 delivered, none early or missing, and a p99
    lateness within the precision plus a margin."""
    cluster = start_cluster(tmp_path)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "rocketpy.tools.benchmark", "timer", "-n",
             cluster.namesrv_addr, "-t", unique("BenchTimer"), "-g", unique("bench_tg"),
             "-c", "300", "--delay", "2", "-w", "8"],
            capture_output=True, text=True, timeout=90, env=bin_env(tmp_path / "bench-logs"),
            cwd=REPO, check=False,
        )  # fmt: skip
    finally:
        cluster.stop()
    assert out.returncode == 0, out.stderr
    line = re.search(
        r"\[Complete\] timer messages sent 300 \(failed 0\) in [\d.]+ s \| delivered 300 \| "
        r"early 0 \| missing 0 \| lateness p50\(ms\): (\d+) \| p99\(ms\): (\d+) \| max\(ms\): \d+",
        out.stdout,
    )
    assert line is not None, out.stdout + out.stderr
    assert int(line.group(2)) <= 1500, line.group(0)
