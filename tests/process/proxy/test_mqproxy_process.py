"""``bin/mqproxy`` as a process: boot line with the bound port, clean SIGTERM, a taken port."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from tests.helpers.processes import BIN, Daemon

pytestmark = pytest.mark.process

BOOT = re.compile(
    r"rocketmq-proxy startup successfully, grpc address 127\.0\.0\.1:(\d+), proxyMode=cluster"
    r" and name server is 127\.0\.0\.1:1"
)


def _conf(tmp: Path, port: int) -> Path:
    conf = tmp / f"rmq-proxy-{port}.json"
    conf.write_text(
        json.dumps(
            {"grpcServerPort": port, "bindAddress": "127.0.0.1", "grpcShutdownTimeSeconds": 1}
        ),
        encoding="utf-8",
    )
    return conf


def test_mqproxy_boots_on_a_free_port_and_stops_on_sigterm(tmp_path: Path) -> None:
    proxy = Daemon(
        [str(BIN / "mqproxy"), "-n", "127.0.0.1:1", "-pc", str(_conf(tmp_path, 0))], tmp_path
    )
    try:
        port = int(proxy.wait_for(BOOT).group(1))
        assert port > 0
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # the gRPC port accepts connections
    finally:
        code = proxy.stop()
    assert code == 0, proxy.tail(3000)
    assert "grpc server stopped" in proxy.output()


def test_mqproxy_on_a_taken_port_exits_non_zero(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proxy = Daemon(
            [str(BIN / "mqproxy"), "-n", "127.0.0.1:1", "-pc", str(_conf(tmp_path, port))], tmp_path
        )
        try:
            proxy.proc.wait(20)
        finally:
            code = proxy.stop()
    assert code == 1, proxy.tail(3000)
    assert "cannot bind the gRPC port" in proxy.output()
