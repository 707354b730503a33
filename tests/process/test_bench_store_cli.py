"""The store benchmark CLI (``python -m rocketpy.tools.bench_store``, ``make bench-store``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import REPO

pytestmark = pytest.mark.process

_RATE = r"\s+([\d,]+) /s\s+[\d.]+ MB/s"


def test_bench_store_prints_every_phase_beside_its_ceilings(tmp_path: Path) -> None:
    """1. Run bench_store with 128 B bodies, 0.3 s per phase, 4 SYNC producers, 1 MiB segments
    (so the ASYNC phases roll segments).
    Expected: exit 0; both ceilings, the three ASYNC phases (single, index, batches of 32)
    and the SYNC phase print a positive rate; every ASYNC phase reports its reput catch-up;
    nothing is left in the directory."""
    root = tmp_path / "bench"
    done = subprocess.run(
        [
            sys.executable, "-m", "rocketpy.tools.bench_store", "--dir", str(root),
            "--size", "128", "--seconds", "0.3", "--producers", "4",
            "--file-size", str(1024 * 1024),
        ],
        capture_output=True, text=True, timeout=120, cwd=REPO, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    for label in (
        "ceiling: bare mmap copy",
        "ceiling: bare write\\+fdatasync",
        "ASYNC_FLUSH 128 B, 1 producer",
        "ASYNC_FLUSH \\+ index 128 B, 1 producer",
        "ASYNC_FLUSH 128 B, batches of 32",
        "SYNC_FLUSH 128 B, 4 producers",
    ):
        m = re.search(label + _RATE, out)
        assert m is not None, f"{label!r} missing in:\n{out}"
        assert int(m.group(1).replace(",", "")) > 0
    assert len(re.findall(r"caught up in [\d.]+s \(counted\)", out)) == 3, out
    assert [p.name for p in root.iterdir()] == [], list(root.iterdir())
