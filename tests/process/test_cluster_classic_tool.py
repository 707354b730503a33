"""``make cluster-classic``'s tool: each classic layout starts, lists masters and slaves, stops."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketpy.tools.cluster_classic import CONF_DIR, layout_specs, read_layout
from tests.helpers.processes import bin_env, run_bin

pytestmark = pytest.mark.process

SMALL = ["--set", "mappedFileSizeCommitLog=1048576", "--set", "mappedFileSizeConsumeQueue=6000"]
EXPECTED = {
    "2m-noslave": {("broker-a", "0"), ("broker-b", "0")},
    "2m-2s-async": {("broker-a", "0"), ("broker-a", "1"), ("broker-b", "0"), ("broker-b", "1")},
    "2m-2s-sync": {("broker-a", "0"), ("broker-a", "1"), ("broker-b", "0"), ("broker-b", "1")},
}


def _tool(*args: str, directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketpy.tools.cluster_classic", *args, "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        env=bin_env(directory.parent / "test-logs"),
        check=False,
    )


def _listed(stdout: str) -> set[tuple[str, str]]:
    rows = [line.split() for line in stdout.splitlines()[1:] if line.strip()]
    return {(row[1], row[2]) for row in rows if len(row) > 3}


def test_cluster_classic_layout_ports_rewritten(tmp_path: Path) -> None:
    """1. Build the specs of 2m-2s-sync with base port 20000 and with base port 0.
    Expected: the NameServer comes first, masters before slaves; conf ports shift by
    base - 9876 (broker-a 10911 -> 21035, its HA port 10912 -> 21036); base 0 gives port 0
    everywhere; every store goes under the given directory; overrides reach every broker."""
    assert set(read_layout("2m-noslave")) == {"broker-a", "broker-b"}
    specs = layout_specs("2m-2s-sync", tmp_path, base_port=20000, overrides={"x": "1"})
    assert [s.name for s in specs] == ["namesrv", "broker-a", "broker-b", "broker-a-s",
                                       "broker-b-s"]  # fmt: skip
    a = specs[1].conf
    assert (a["listenPort"], a["haListenPort"], a["brokerRole"]) == ("21035", "21036",
                                                                      "SYNC_MASTER")  # fmt: skip
    assert a["storePathRootDir"] == str(tmp_path / "broker-a" / "store")
    assert all(s.conf["x"] == "1" for s in specs[1:])
    free = layout_specs("2m-2s-sync", tmp_path, base_port=0)
    assert {s.conf["listenPort"] for s in free} == {"0"}
    assert {s.conf["haListenPort"] for s in free[1:]} == {"0"}
    assert (CONF_DIR / "2m-2s-async").is_dir()


@pytest.mark.parametrize("layout", sorted(EXPECTED))
def test_cluster_classic_start_lists_masters_and_slaves(tmp_path: Path, layout: str) -> None:
    """1. start --layout L on free ports. 2. mqadmin clusterList until every broker is listed.
    3. stop.
    Expected: the summary names NAMESRV_ADDR and how to stop; clusterList shows each broker
    name with brokerId 0 (master) and, with slaves, brokerId 1; stop ends every recorded
    process, slaves and masters before the NameServer."""
    directory = tmp_path / "cluster"
    started = _tool("start", "--layout", layout, "--base-port", "0", *SMALL, directory=directory)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert "cluster-classic-stop" in started.stdout
        match = re.search(r"NAMESRV_ADDR=(\S+)", started.stdout)
        assert match is not None
        deadline = time.monotonic() + 20
        while True:
            listed = run_bin(["mqadmin", "clusterList", "-n", match.group(1)], tmp_path)
            assert listed.returncode == 0, listed.stderr
            if _listed(listed.stdout) >= EXPECTED[layout] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert _listed(listed.stdout) == EXPECTED[layout], listed.stdout
        members = json.loads((directory / "cluster.json").read_text())["members"]
        assert [m["role"] for m in members] == ["namesrv", *["broker"] * len(EXPECTED[layout])]
    finally:
        stopped = _tool("stop", directory=directory)
    assert stopped.returncode == 0
    assert stopped.stdout.index("stopped broker-a ") < stopped.stdout.index("stopped namesrv")
    assert not (directory / "cluster.json").exists()
