"""``make cluster MODE=dledger`` and its kill-master target (rocketpy/tools/cluster_dledger.py)
as an operator runs them: real daemons on free loopback ports."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketpy.tools.cluster_dledger import group_specs

pytestmark = pytest.mark.process


def _tool(*args: str, directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketpy.tools.cluster_dledger", *args, "--dir", str(directory)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _cluster_list(namesrv: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "rocketpy.cli.admin", "clusterList", "-n", namesrv],
        capture_output=True, text=True, timeout=30, check=False,
    ).stdout  # fmt: skip


def test_specs_shift_sample_ports(tmp_path: Path) -> None:
    """Base port 10876 shifts the samples' listen and peer ports by 1000; every broker gets
    the same peer list and its own store."""
    specs = group_specs(tmp_path, base_port=10876)
    assert specs[0].conf["listenPort"] == "10876"
    brokers = specs[1:]
    assert [b.conf["listenPort"] for b in brokers] == ["31911", "31921", "31931"]
    peers = {b.conf["dLegerPeers"] for b in brokers}
    assert peers == {"n0-127.0.0.1:41911;n1-127.0.0.1:41912;n2-127.0.0.1:41913"}
    assert [b.conf["dLegerSelfId"] for b in brokers] == ["n0", "n1", "n2"]
    assert len({b.conf["storePathRootDir"] for b in brokers}) == 3


def test_cluster_dledger_start_kill_master_stop(tmp_path: Path) -> None:
    """1. start --base-port 0. Expected: the summary lists a NameServer, one master and two
    slaves with addresses; clusterList shows brokerId 0 and two slave ids for RaftNode00.
    2. kill-master. Expected: it names the killed master; within 20 s clusterList shows
    another address as brokerId 0. 3. stop (the shared cluster tool). Expected: exit 0."""
    directory = tmp_path / "c"
    try:
        out = _tool("start", "--base-port", "0", directory=directory)
        assert out.returncode == 0, out.stdout + out.stderr
        namesrv = re.search(r"NAMESRV_ADDR=(\S+)", out.stdout)
        assert namesrv is not None, out.stdout
        masters = re.findall(r"broker-n\d\s+master\s+(\S+)", out.stdout)
        slaves = re.findall(r"broker-n(\d)\s+slave\((\d)\)", out.stdout)
        assert len(masters) == 1, out.stdout
        assert len(slaves) == 2, out.stdout
        assert all(int(bid) == int(n) + 1 for n, bid in slaves), slaves
        listed = _cluster_list(namesrv.group(1))
        assert re.search(rf"RaftNode00\s+0\s+{re.escape(masters[0])}", listed), listed
        killed = _tool("kill-master", directory=directory)
        assert killed.returncode == 0, killed.stdout + killed.stderr
        assert masters[0] in killed.stdout
        deadline = time.monotonic() + 20
        while True:
            row = re.search(r"RaftNode00\s+0\s+(\S+)", _cluster_list(namesrv.group(1)))
            if row and row.group(1) != masters[0]:
                break
            assert time.monotonic() < deadline, "no new master listed"
            time.sleep(0.5)
    finally:
        stopped = subprocess.run(
            [sys.executable, "-m", "rocketpy.tools.cluster", "stop", "--dir", str(directory)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
