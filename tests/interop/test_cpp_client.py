"""The real C++-based RocketMQ client (rocketmq-client-python 2.0.0) against our daemons.

``make test-interop`` installs the client first (``install_cpp_client.py``); the client runs in its
own process (``cpp_driver.py``) so a crash or hang in the native library cannot take pytest down.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import start_broker, start_namesrv
from tests.process.client.test_transaction import pull_topic

pytestmark = pytest.mark.interop

HERE = Path(__file__).parent


def _driver(*args: str, timeout_s: float = 60.0) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, str(HERE / "cpp_driver.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        cwd=HERE,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"driver printed no result (rc {result.returncode}):\n{result.stderr[-2000:]}"
    parsed: dict[str, object] = json.loads(lines[-1])
    return parsed


@pytest.fixture(scope="module", autouse=True)
def _cpp_client() -> None:
    if importlib.util.find_spec("rocketmq") is None:
        pytest.skip("rocketmq-client-python is not installed; run `make test-interop`")


def test_cpp_producer_missing_topic_gets_error_not_hang(tmp_path: Path) -> None:
    """1. Start mqnamesrv. 2. The C++ producer sends to a topic no broker serves.
    3. It gets an error back within its send timeout instead of hanging."""
    daemon, addr = start_namesrv(tmp_path)
    try:
        result = _driver("send-missing", "--namesrv", addr, "--topic", "NoSuchTopic")
        assert result["ok"] is False
        assert isinstance(result["seconds"], float)
        assert result["seconds"] < 20.0
        assert "route" in str(result["error"]).lower() or "topic" in str(result["error"]).lower()
    finally:
        assert daemon.stop() == 0, daemon.output()


def test_cpp_producer_and_push_consumer_round_trip(tmp_path: Path) -> None:
    """1. Start mqnamesrv and mqbroker (auto topic creation on). 2. The C++ producer sends 1,000
    messages synchronously. 3. Every send answers SEND_OK (status 0). 4. The C++ PushConsumer
    receives all 1,000 distinct bodies."""
    daemon, addr = start_namesrv(tmp_path)
    broker, _ = start_broker(tmp_path, addr)
    try:
        produced = _driver(
            "produce",
            "--namesrv",
            addr,
            "--topic",
            "InteropTopic",
            "--count",
            "1000",
            timeout_s=120.0,
        )
        assert produced["error_count"] == 0, produced["errors"]
        assert produced["statuses"] == [0] * 1000
        consumed = _driver(
            "consume",
            "--namesrv",
            addr,
            "--topic",
            "InteropTopic",
            "--group",
            "interop_cg",
            "--count",
            "1000",
            "--timeout",
            "60",
            timeout_s=120.0,
        )
        assert consumed["received"] == sorted(f"interop-{i}" for i in range(1000))
    finally:
        assert broker.stop() == 0, broker.output()
        assert daemon.stop() == 0, daemon.output()


@pytest.mark.timeout(150)  # the C++ client's next heartbeat can be 30 s away (see below)
def test_cpp_transaction_producer_commit_rollback_and_check_back(tmp_path: Path) -> None:
    """1. Start mqnamesrv and mqbroker with a fast transaction check (every 300 ms once 1 s
    old; up to 200 checks: a check finds no producer channel until the C++ client's first
    heartbeat, which under load can be its periodic one 30 s on, after the default 15 checks
    had run out). 2. The C++ TransactionMQProducer sends 3 half messages each whose local
    transactions commit, roll back, or answer UNKNOWN (its checker commits those). 3. Pull the
    topic.
    Expected: every half send is SEND_OK; the broker checks back exactly the UNKNOWN ones; the
    topic holds the committed and the checked-and-committed messages, each once, and no
    rolled-back one."""
    daemon, addr = start_namesrv(tmp_path)
    broker, broker_addr = start_broker(
        tmp_path,
        addr,
        extra="transactionCheckInterval=300\ntransactionTimeOut=1000\ntransactionCheckMax=200\n",
    )
    try:
        result = _driver(
            "txn", "--namesrv", addr, "--topic", "InteropTxn", "--count", "3", "--timeout", "75",
            timeout_s=120.0,
        )  # fmt: skip
        got = asyncio.run(pull_topic(broker_addr, "InteropTxn"))
    finally:
        assert broker.stop() == 0, broker.output()
        assert daemon.stop() == 0, daemon.output()
    assert result["statuses"] == [0] * 9
    assert result["checked"] == [f"txn-unknown-{i}" for i in range(3)], broker.tail(4000)
    expected = sorted(
        f"txn-{kind}-{i}".encode() for kind in ("commit", "unknown") for i in range(3)
    )
    assert sorted(m.body for m in got) == expected
