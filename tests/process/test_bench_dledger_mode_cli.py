"""``python -m rocketpy.tools.bench_dledger_mode --quick`` (``make bench-dledger-mode``) end to end.

Checks the shape of the closing summary and that no send failed, never the speed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import REPO, bin_env

pytestmark = pytest.mark.process

_RATE = (
    r"\s+([\d,]+) msg/s\s+[\d.]+ MB/s\s+p50\s+[\d.]+ ms\s+p99\s+[\d.]+ ms\s+failed (\d+)"
    r"\s+broker CPU/msg ([\d.]+) us \(master ([\d.]+) us\)\n"
)


def _find(pattern: str, text: str) -> re.Match[str]:
    found = re.search(pattern, text)
    assert found is not None, f"{pattern!r} not in:\n{text}"
    return found


@pytest.mark.timeout(300)
def test_bench_dledger_mode_quick_summary(tmp_path: Path) -> None:
    """1. Run ``bench_dledger_mode --quick`` (it starts a single master, a controller-mode set and
    two DLedger groups, batch push off and on, one 1 s run each). 2. Read the summary after the
    ``== rocketpy bench-dledger-mode`` line.
    Expected: exit 0; one line per phase with a positive rate, no failed send and a broker CPU
    per message (the replicated phases spend more broker CPU per message than the master
    alone); the means of batch push off and on; the two ratios with their aims."""
    out = subprocess.run(
        [sys.executable, "-m", "rocketpy.tools.bench_dledger_mode", "--quick",
         "--dir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=280, env=bin_env(tmp_path / "logs"), cwd=REPO,
        check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    _, sep, summary = out.stdout.partition("== rocketpy bench-dledger-mode:")
    assert sep, out.stdout[-3000:] + out.stderr[-3000:]
    labels = (
        "single ASYNC master",
        "controller-mode set, all-ack",
        "DLedger 3 replicas, batch push off #1",
        "DLedger 3 replicas, batch push on #1",
    )
    for label in labels:
        found = _find(re.escape(label) + _RATE, summary)
        assert int(found.group(1).replace(",", "")) > 0, found.group(0)
        assert found.group(2) == "0", found.group(0)
        total, master = float(found.group(3)), float(found.group(4))
        assert total >= master > 0, found.group(0)
        if label != labels[0]:
            assert total > master, found.group(0)  # the other replicas worked too
    for name in ("off", "on"):
        _find(rf"batch push {name}: mean [\d,]+ msg/s over 1 runs, median p99 [\d.]+ ms", summary)
    _find(r"batch / single push: [\d.]+x \(aim >= 1\.45\)", summary)
    _find(r"DLedger \(batch on\) / controller-mode set: [\d.]+% \(aim >= 60%\)", summary)
