"""Start-up failures name their cause in one line (issue 25, item 2): a port in use (listen, HA,
NameServer, controller), a read-only store, a bad config value, an unknown config key. The
traceback goes to the JSON log, not the console."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.controller_mode import BROKER_KEYS, SAFE_CONTROLLER_KEYS, broker_addrs
from tests.helpers.processes import (
    BIN,
    BROKER_BOOT,
    Daemon,
    run_bin,
    start_controller,
    start_namesrv,
    write_controller_confs,
)

pytestmark = pytest.mark.process


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port held by a listening socket for the test's duration."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def _assert_one_clear_line(stderr: str, *needles: str) -> None:
    lines = [ln for ln in stderr.splitlines() if all(n in ln for n in needles)]
    assert lines, stderr
    assert "Traceback" not in stderr, stderr


def test_namesrv_port_in_use_names_address_and_port(tmp_path: Path, busy_port: int) -> None:
    """1. Hold a port. 2. Start mqnamesrv on it.
    Expected: exit 1; one stderr line says "start failed" with the address, the port and
    "address already in use"; no traceback on the console; the JSON log has it."""
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={busy_port}\nbindAddress=127.0.0.1\n"
                    f"kvConfigPath={tmp_path / 'kv.json'}\n", encoding="utf-8")  # fmt: skip
    result = run_bin(["mqnamesrv", "-c", str(conf)], tmp_path)
    assert result.returncode == 1, result.stderr
    _assert_one_clear_line(result.stderr, "start failed", str(busy_port), "already in use")
    assert "Traceback" in (tmp_path / "logs" / "namesrv.log").read_text()


def test_broker_port_in_use_names_address_and_port(tmp_path: Path, busy_port: int) -> None:
    """1. Hold a port. 2. Start mqbroker with listenPort on it (haListenPort=0: the default,
    listenPort + 1, may be any other process's ephemeral port, and is bound first).
    Expected: exit 1; one stderr line with "start failed", the port and "already in use"."""
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerIP1=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort={busy_port}\n"
                    f"haListenPort=0\nstorePathRootDir={tmp_path / 'store'}\n"
                    f"mappedFileSizeCommitLog=65536\n", encoding="utf-8")  # fmt: skip
    result = run_bin(["mqbroker", "-c", str(conf), "-n", "127.0.0.1:1"], tmp_path)
    assert result.returncode == 1, result.stderr
    _assert_one_clear_line(result.stderr, "start failed", str(busy_port), "already in use")


def test_broker_bad_delete_when_exits_2_naming_the_key(tmp_path: Path) -> None:
    """1. Start mqbroker with deleteWhen=25. Expected: exit 2, one line naming the key, the
    value and what is allowed."""
    conf = tmp_path / "broker.conf"
    conf.write_text(f"deleteWhen=25\nstorePathRootDir={tmp_path / 'store'}\n", encoding="utf-8")
    result = run_bin(["mqbroker", "-c", str(conf), "-n", "127.0.0.1:1"], tmp_path)
    assert result.returncode == 2, result.stderr
    _assert_one_clear_line(result.stderr, "deleteWhen='25'", "hours 00-23")


@pytest.mark.parametrize("controller_mode", [False, True], ids=["classic", "controller"])
def test_broker_ha_port_in_use_names_address_and_port(
    tmp_path: Path, busy_port: int, controller_mode: bool
) -> None:
    """1. Hold a port. 2. Start mqbroker with haListenPort on it (classic master; controller
    mode, with no controller running).
    Expected: exit 1; one stderr line with "start failed", the port and "already in use"."""
    mode = "enableControllerMode=true\ncontrollerAddr=127.0.0.1:1\n" if controller_mode else ""
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerIP1=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort=0\n"
                    f"haListenPort={busy_port}\nstorePathRootDir={tmp_path / 'store'}\n"
                    f"mappedFileSizeCommitLog=65536\n{mode}", encoding="utf-8")  # fmt: skip
    result = run_bin(["mqbroker", "-c", str(conf), "-n", "127.0.0.1:1"], tmp_path)
    assert result.returncode == 1, result.stderr
    _assert_one_clear_line(result.stderr, "start failed", str(busy_port), "already in use")


def test_controller_port_in_use_names_address_and_port(tmp_path: Path, busy_port: int) -> None:
    """1. Hold a port. 2. Start mqcontroller whose own peer address is that port.
    Expected: exit 1; one stderr line with "start failed", the port and "already in use"."""
    conf = tmp_path / "controller.conf"
    conf.write_text(f"controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:{busy_port}\n"
                    f"controllerDLegerSelfId=n0\ncontrollerStorePath={tmp_path / 'raft'}\n",
                    encoding="utf-8")  # fmt: skip
    result = run_bin(["mqcontroller", "-c", str(conf)], tmp_path)
    assert result.returncode == 1, result.stderr
    _assert_one_clear_line(result.stderr, "start failed", str(busy_port), "already in use")


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on a read-only tmpfs (root can write anywhere else)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only tmpfs needs root")
    where = tmp_path / "ro"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(where)],
                             capture_output=True, text=True, check=False)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True, check=False)


def test_broker_read_only_store_names_path_and_errno(tmp_path: Path, read_only_dir: Path) -> None:
    """1. Start mqbroker whose storePathRootDir is on a read-only file system.
    Expected: exit 1; one stderr line with "start failed", the path and "Read-only file
    system"; no traceback on the console."""
    store = read_only_dir / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerIP1=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort=0\n"
                    f"storePathRootDir={store}\n", encoding="utf-8")  # fmt: skip
    result = run_bin(["mqbroker", "-c", str(conf), "-n", "127.0.0.1:1"], tmp_path)
    assert result.returncode == 1, result.stderr
    _assert_one_clear_line(result.stderr, "start failed", str(store), "Read-only file system")


@pytest.mark.parametrize(
    ("command", "text", "needles"),
    [
        ("mqbroker", "flushDiskTyp=SYNC_FLUSH\n", ["flushDiskTyp (did you mean flushDiskType?)"]),
        ("mqnamesrv", "listenPort=0\nfooBarBaz=1\n", ["fooBarBaz"]),
        ("mqcontroller", "controllerDLegerGroup=g\nelectPolicy=x\n", ["electPolicy"]),
    ],
)
def test_unknown_config_key_exits_2_naming_it(
    tmp_path: Path, command: str, text: str, needles: list[str]
) -> None:
    """1. Start each daemon with a config file holding a key it does not know (a misspelt
    upstream key; an invented one).
    Expected: exit 2 before anything starts; one stderr line naming the file and the key, with
    the closest known key when one is close."""
    conf = tmp_path / "daemon.conf"
    conf.write_text(text, encoding="utf-8")
    result = run_bin([command, "-c", str(conf), "-n", "127.0.0.1:1"][:3 if command != "mqbroker"
                     else 5], tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stderr
    _assert_one_clear_line(result.stderr, "unknown config keys", str(conf), *needles)


def test_controller_mode_broker_boots_only_once_a_controller_gives_it_a_role(
    tmp_path: Path,
) -> None:
    """1. Write a 3-controller group's configs but start none; start mqnamesrv and a broker in
    controller mode pointing at them. 2. Start the controllers.
    Expected: 1 prints that the broker waits for the controllers (naming them), not "boot
    success"; after 2 the boot success line follows and the broker is registered as master."""
    namesrv, ns = start_namesrv(tmp_path)
    confs = write_controller_confs(tmp_path, 3, SAFE_CONTROLLER_KEYS)
    peers = next(ln.split("=", 1)[1] for ln in confs[0].read_text().splitlines()
             if ln.startswith("controllerDLegerPeers="))  # fmt: skip
    ctl_addrs = [p.split("-", 1)[1] for p in peers.split(";")]
    conf = tmp_path / "b1.conf"
    conf.write_text(
        f"brokerName=broker-a\nbrokerIP1=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort=0\n"
        f"storePathRootDir={tmp_path / 'b1'}\nmappedFileSizeCommitLog=65536\n{BROKER_KEYS}"
        f"controllerAddr={';'.join(ctl_addrs)}\n",
        encoding="utf-8",
    )
    broker = Daemon([str(BIN / "mqbroker"), "-c", str(conf), "-n", ns], tmp_path / "logs-b1")
    controllers: list[Daemon] = []
    try:
        broker.wait_for(re.compile(r"has no role yet: waiting for the controllers at " +
                                   re.escape(ctl_addrs[0])))  # fmt: skip
        assert not BROKER_BOOT.search(broker.output())
        for c in confs:
            controllers.append(start_controller(c, tmp_path)[0])
        addr = broker.wait_for(BROKER_BOOT, 30).group(2)
        assert asyncio.run(_master_listed(ns, addr, 15))
    finally:
        broker.stop()
        for d in controllers:
            d.stop()
        namesrv.stop()


async def _master_listed(ns: str, addr: str, timeout_s: float) -> bool:
    async with asyncio.timeout(timeout_s):
        while (await broker_addrs(ns)).get(0) != addr:
            await asyncio.sleep(0.1)
    return True
