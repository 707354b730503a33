"""``bin/mqnamesrv``, ``bin/mqadmin`` and ``bin/mqshutdown`` as real processes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rocketpy.cli.shutdown import find_daemons
from tests.helpers.processes import BIN, NAMESRV_BOOT, run_bin, start_namesrv

pytestmark = pytest.mark.process


def test_namesrv_boots_fast_and_stops_on_sigterm(tmp_path: Path) -> None:
    """1. Start bin/mqnamesrv on port 0. 2. Boot line with the real port, within 5 s (about
    0.3 s on an idle machine; the bound catches a heavy import creeping into the boot path
    without failing on a loaded CI machine). 3. SIGTERM -> exit 0 and the JSON log file has
    the stop phases."""
    started = time.monotonic()
    daemon, addr = start_namesrv(tmp_path)
    boot_s = time.monotonic() - started
    try:
        assert addr.startswith("127.0.0.1:")
        assert int(addr.rsplit(":", 1)[1]) > 0
        assert boot_s < 5.0, f"boot took {boot_s:.2f} s"
    finally:
        assert daemon.stop() == 0, daemon.output()
    log = (tmp_path / "logs" / "namesrv.log").read_text()
    assert '"event": "name server stopped"' in log


def test_namesrv_print_config_and_bad_value(tmp_path: Path) -> None:
    """-p prints key=value lines and exits 0; a bad value exits 2 with one line naming it."""
    conf = tmp_path / "n.conf"
    conf.write_text("listenPort=1234\n")
    printed = run_bin(["mqnamesrv", "-c", str(conf), "-p"], tmp_path)
    assert printed.returncode == 0
    assert "listenPort=1234" in printed.stdout.splitlines()
    conf.write_text("listenPort=notaport\n")
    bad = run_bin(["mqnamesrv", "-c", str(conf)], tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0
    assert "listenPort" in bad.stderr
    assert "'notaport'" in bad.stderr


def test_mqadmin_against_running_namesrv(tmp_path: Path) -> None:
    """mqadmin's namesrv commands against a live mqnamesrv, with upstream's output."""
    daemon, addr = start_namesrv(tmp_path)
    try:
        put = run_bin(
            ["mqadmin", "updateKvConfig", "-n", addr, "-s", "NS", "-k", "k", "-v", "v"], tmp_path
        )
        assert put.returncode == 0, put.stderr
        assert "create or update kv config to namespace success." in put.stdout
        cluster = run_bin(["mqadmin", "clusterList", "-n", addr], tmp_path)
        assert cluster.stdout.startswith("#Cluster Name")
        route = run_bin(["mqadmin", "topicRoute", "-n", addr, "-t", "Nope"], tmp_path)
        assert route.returncode == 1
        assert "TOPIC_NOT_EXIST" in route.stderr
        upd = run_bin(
            [
                "mqadmin",
                "updateNamesrvConfig",
                "-n",
                addr,
                "-k",
                "orderMessageEnable",
                "-v",
                "true",
            ],
            tmp_path,
        )
        assert upd.returncode == 0, upd.stderr
        got = run_bin(["mqadmin", "getNamesrvConfig", "-n", addr], tmp_path)
        assert f"============{addr}============" in got.stdout
        assert any(
            line.startswith("orderMessageEnable") and line.endswith("=  true")
            for line in got.stdout.splitlines()
        )
        deleted = run_bin(
            ["mqadmin", "deleteKvConfig", "-n", addr, "-s", "NS", "-k", "k"], tmp_path
        )
        assert deleted.returncode == 0
        assert run_bin(["mqadmin", "topicList", "-n", addr], tmp_path).returncode == 0
    finally:
        assert daemon.stop() == 0


def test_mqadmin_unreachable_namesrv_fails_cleanly(tmp_path: Path) -> None:
    """A dead address gives exit 1 and one error line, no traceback."""
    result = run_bin(["mqadmin", "topicList", "-n", "127.0.0.1:1"], tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr


def test_mqshutdown_stops_namesrv(tmp_path: Path) -> None:
    """mqshutdown namesrv --conf finds exactly this daemon by its command line; it exits 0 on the
    SIGTERM. (Without --conf it would signal every mqnamesrv on the host, as upstream's does.)"""
    daemon, _ = start_namesrv(tmp_path)
    conf = str(tmp_path / "namesrv.conf")
    try:
        assert find_daemons("namesrv", conf) == [daemon.proc.pid]
        assert daemon.proc.pid in find_daemons("namesrv")
        result = run_bin(["mqshutdown", "namesrv", "--conf", conf], tmp_path)
        assert result.returncode == 0, result.stderr
        assert f"Send shutdown request to mqnamesrv({daemon.proc.pid}) OK" in result.stdout
        assert daemon.proc.wait(10) == 0
        again = run_bin(["mqshutdown", "namesrv", "--conf", conf], tmp_path)
        assert again.returncode == 1
    finally:
        assert daemon.stop() == 0


def test_namesrv_boot_line_regex_matches_upstream_shape() -> None:
    """The regex tests and tools use matches upstream's exact phrase."""
    line = "The Name Server boot success. serializeType=JSON, address 127.0.0.1:9876"
    match = NAMESRV_BOOT.search(line)
    assert match is not None
    assert match.group(1) == "127.0.0.1:9876"
    assert (BIN / "mqnamesrv").exists()
