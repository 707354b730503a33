"""Start-up failures name their cause in one line (issue 25, item 2): a port in use, a bad
config value. The traceback goes to the JSON log, not the console."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.processes import run_bin

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
    """1. Hold a port. 2. Start mqbroker with listenPort on it.
    Expected: exit 1; one stderr line with "start failed", the port and "already in use"."""
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerIP1=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort={busy_port}\n"
                    f"storePathRootDir={tmp_path / 'store'}\nmappedFileSizeCommitLog=65536\n",
                    encoding="utf-8")  # fmt: skip
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
