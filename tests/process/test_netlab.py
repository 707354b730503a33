"""The partition lab's links (tests/helpers/netlab.py): a cut drops, a throttle slows, a heal
restores. The partition suites trust these; here they are measured on a real TCP stream.

Needs root and iproute2 (``ip netns``, ``tc``): skipped with the reason elsewhere.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from tests.helpers.netlab import CLIENT, NetLab, lab_fixture

pytestmark = pytest.mark.process

lab = lab_fixture(["a"])

PORT = 7000
#: How long the sink counts what arrives.
WINDOW_S = 2.0

# Accept one connection on the host's address, count what arrives for WINDOW_S, print it.
_SINK = """
import socket, sys, time
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
conn, _ = srv.accept()
conn.settimeout(0.1)
total, end = 0, time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    try:
        chunk = conn.recv(1 << 16)
    except TimeoutError:
        continue
    if not chunk:
        break
    total += len(chunk)
print(total, flush=True)
"""


def _received(net: NetLab) -> int:
    """Bytes a sink in host ``a`` receives from this host in WINDOW_S while it sends flat out."""
    with subprocess.Popen(
        [*net.wrap("a"), sys.executable, "-c", _SINK, net.ip["a"], str(PORT), str(WINDOW_S)],
        stdout=subprocess.PIPE, text=True,
    ) as sink:  # fmt: skip
        try:
            assert sink.stdout is not None
            assert sink.stdout.readline().strip() == "ready"
            with socket.create_connection((net.ip["a"], PORT), timeout=5) as conn:
                conn.setblocking(False)
                block = b"x" * (1 << 16)
                end = time.monotonic() + WINDOW_S + 0.5
                while time.monotonic() < end:
                    try:
                        conn.send(block)
                    except BlockingIOError:
                        time.sleep(0.001)
                    except (BrokenPipeError, ConnectionResetError):
                        break  # the sink's window is over
            out, _ = sink.communicate(timeout=10)
            return int(out.split()[-1])
        finally:
            if sink.poll() is None:
                sink.kill()


def test_throttle_slows_a_link_and_heal_restores_it(lab: NetLab) -> None:
    """1. Throttle this host -> ``a``; send flat out to a sink in ``a`` for 2 s.
    2. Heal; send again.
    Expected: throttled, the sink gets at most a few seconds' worth of THROTTLE_RATE (256
    kbit/s: 64 KB in 2 s, plus what the queue holds); healed, well over 10 MB."""
    lab.throttle(CLIENT, "a")
    slow = _received(lab)
    lab.heal()
    fast = _received(lab)
    assert 0 < slow < 256 * 1024, slow
    assert fast > 10 * 1024 * 1024, fast


def test_cut_drops_a_link(lab: NetLab) -> None:
    """1. Cut this host from ``a``; connect to a listener in ``a``.
    Expected: no connection within 2 s (the SYN is dropped, nothing answers)."""
    with subprocess.Popen(
        [*lab.wrap("a"), sys.executable, "-c", _SINK, lab.ip["a"], str(PORT), "1"],
        stdout=subprocess.PIPE, text=True,
    ) as sink:  # fmt: skip
        try:
            assert sink.stdout is not None
            assert sink.stdout.readline().strip() == "ready"
            lab.cut(CLIENT, "a")
            with pytest.raises(TimeoutError):
                socket.create_connection((lab.ip["a"], PORT), timeout=2).close()
        finally:
            sink.kill()
