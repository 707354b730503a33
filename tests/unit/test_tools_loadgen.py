"""The benchmark's /proc readers."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from rocketpy.tools.loadgen import cpu_seconds


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
