"""Running ``python -m rocketpy.tools.fuzz`` against daemons started by tests/helpers/processes.py,
and the checks every fuzz test makes afterwards: no traceback in a daemon's output, RSS within
its bound, the HA port a controller-mode master listens on.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rocketpy.tools.loadgen import rss_mb
from tests.helpers.processes import REPO, Daemon

HA_LISTENING = re.compile(r"AutoSwitchHAService listening.*port=(\d+)")


@dataclass(frozen=True)
class Target:
    """One fuzz target: a daemon port and what to speak to it."""

    name: str
    addr: str
    kind: str = "remoting"
    codes: str = "namesrv"
    probe_code: int = 105


def run_fuzz(
    target: Target, frames: int, *, seed: int, topic: str, timeout_s: float, connections: int = 16
) -> dict[str, object]:
    """Run the fuzz CLI to completion; return its JSON summary (``returncode`` and ``output``
    added). Raises AssertionError when it prints no summary."""
    argv = [sys.executable, "-m", "rocketpy.tools.fuzz", "--target", target.addr,
            "--kind", target.kind, "--codes", target.codes, "--frames", str(frames),
            "--seed", str(seed), "--connections", str(connections), "--topic", topic,
            "--probe-code", str(target.probe_code)]  # fmt: skip
    began = time.monotonic()
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout_s, cwd=REPO, check=False
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("fuzz-json ")]
    assert lines, f"no summary from {argv}:\n{done.stdout}\n{done.stderr[-3000:]}"
    summary: dict[str, object] = json.loads(lines[-1].removeprefix("fuzz-json "))
    summary["returncode"] = done.returncode
    summary["output"] = (done.stdout + done.stderr)[-3000:]
    summary["wall_s"] = round(time.monotonic() - began, 1)
    return summary


def tracebacks(daemon: Daemon) -> list[str]:
    """Text around each "Traceback" in the daemon's stdout and stderr log."""
    found = [ln for ln in daemon.lines if "Traceback" in ln]
    return found + _scan(daemon.stderr_path)


def log_tracebacks(root: Path) -> list[str]:
    """Text around each "Traceback" in the JSON log files under ``root`` (``ROCKETPY_LOG_DIR``
    of the daemons; rotated files too): the console renderer on stderr does not print one."""
    return [f"{p}: {tb}" for p in sorted(root.rglob("*.log*")) for tb in _scan(p)]


def _scan(path: Path) -> list[str]:
    """Read in chunks: a fuzzed daemon's log runs to hundreds of MB."""
    found: list[str] = []
    with path.open("rb") as f:
        tail = b""
        while chunk := f.read(1 << 22):
            data = tail + chunk
            at = data.find(b"Traceback")
            while at >= 0 and len(found) < 5:
                found.append(data[max(0, at - 500) : at + 2000].decode(errors="replace"))
                at = data.find(b"Traceback", at + 1)
            tail = data[-8:]  # shorter than "Traceback": no match is counted twice
    return found


def ha_port(daemon: Daemon, timeout_s: float = 15.0) -> int:
    """The port a controller-mode master's AutoSwitch HA service listens on (from its log)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        match = HA_LISTENING.search(daemon.stderr_path.read_text(errors="replace"))
        if match:
            return int(match.group(1))
        time.sleep(0.1)
    raise AssertionError(f"no HA listening line:\n{daemon.tail(3000)}")


def rss_bound_mb(before: float) -> float:
    """The RSS a daemon may reach after fuzzing: twice its start, or 200 MB more for a small
    one. Fuzzing adds real state within fixed pools (fuzz-* brokers, topics and KV entries,
    messages the broker accepted and its mapped store files); a leak grows with frames and
    breaks this within 10^6 of them."""
    return max(2 * before, before + 200)


def rss(daemon: Daemon) -> float:
    """VmRSS of the daemon in MiB."""
    return rss_mb(daemon.proc.pid)
