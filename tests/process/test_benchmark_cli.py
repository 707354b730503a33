"""The benchmark CLI (``python -m rocketpy.tools.benchmark``) against real daemons."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cluster import start_cluster, unique
from tests.helpers.processes import REPO, bin_env

pytestmark = pytest.mark.process


def _bench(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketpy.tools.benchmark", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=bin_env(tmp / "bench-logs"),
        cwd=REPO,
        check=False,
    )


def test_benchmark_producer_then_consumer_report_rates(tmp_path: Path) -> None:
    """1. Start mqnamesrv + mqbroker. 2. ``benchmark producer`` for 2 s with 8 in flight, then
    ``batchproducer`` for 1 s. 3. ``benchmark consumer`` of the same topic.
    Expected: interval lines in upstream's shape, a summary with a positive TPS and no failures,
    and the consumer receives at least as many messages as were acknowledged."""
    cluster = start_cluster(tmp_path)
    topic = unique("BenchCli")
    try:
        ns = cluster.namesrv_addr
        single = _bench(
            tmp_path, "producer", "-n", ns, "-t", topic, "-w", "8", "-d", "2",
            "--report-interval", "1",
        )  # fmt: skip
        assert single.returncode == 0, single.stderr
        assert re.search(r"Current Time: .* \| Send TPS: [\d,]+ \| Max RT\(ms\): ", single.stdout)
        done = re.search(r"\[Complete\] Send Total: ([\d,]+) \| Send Failed: (\d+)", single.stdout)
        assert done is not None, single.stdout
        sent = int(done.group(1).replace(",", ""))
        assert sent > 0
        assert done.group(2) == "0"
        batch = _bench(
            tmp_path, "batchproducer", "-n", ns, "-t", topic, "-w", "2", "-b", "16", "-d", "1",
        )  # fmt: skip
        batch_done = re.search(r"\[Complete\] Send Total: ([\d,]+) \| Send Failed: 0", batch.stdout)
        assert batch_done is not None, batch.stdout + batch.stderr
        batched = int(batch_done.group(1).replace(",", ""))
        assert batched % 16 == 0
        consumed = _bench(
            tmp_path, "consumer", "-n", ns, "-t", topic, "-g", unique("bench_cg"), "-d", "6",
            "--report-interval", "1",
        )  # fmt: skip
        assert consumed.returncode == 0, consumed.stderr
        rates = re.findall(r"Consume TPS: ([\d,]+)", consumed.stdout)
        assert rates, consumed.stdout
        total = re.search(r"consumed ([\d,]+) messages", consumed.stdout)
        assert total is not None, consumed.stdout
        assert int(total.group(1).replace(",", "")) >= sent + batched
    finally:
        cluster.stop()
