"""The proxy's metrics, both modes, as processes: Prometheus scrape and metrics dumps.

1. ``mqnamesrv`` + ``mqbroker`` (with ``--enable-proxy``: Local mode) + ``mqproxy`` (Cluster mode)
run as processes, each proxy with ``metricsExporterType=PROM`` on its own loopback port and
metrics dumps every 200 ms into its own directory. 2. Over real gRPC: SendMessage OK three times,
SendMessage to a topic nobody created once (TOPIC_NOT_FOUND), QueryRoute once. 3. ``GET /metrics``
is parsed with ``prometheus_client``'s parser: ``rocketmq_proxy_up`` is 1 with the proxy's mode,
``rocketmq_rpc_latency`` counts each (rpc_method, response_code) exactly, its ``+Inf`` bucket
equals the count and its sum is positive. 4. The dump files hold JSON records with the same
counts and the proxy's mode.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.pb import service_pb2_grpc
from rocketpy.tools.children import free_ports
from tests.helpers.grpc_proxy import TIMEOUT_S, create_topic, message, meta
from tests.helpers.processes import BIN, Daemon, start_broker, start_namesrv

pytestmark = pytest.mark.process

BOOT = re.compile(
    r"rocketmq-proxy startup successfully, grpc address 127\.0\.0\.1:(\d+), proxyMode="
)
TOPIC = "MetricsTopic"


def _conf(tmp: Path, name: str, prom_port: int) -> Path:
    conf = tmp / f"{name}.json"
    conf.write_text(
        json.dumps({
            "grpcServerPort": 0, "bindAddress": "127.0.0.1", "grpcShutdownTimeSeconds": 1,
            "metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1",
            "metricsPromExporterPort": prom_port, "metricsDumpInterval": 200,
            "metricsDumpDir": str(tmp / f"dumps-{name}"),
        }),
        encoding="utf-8",
    )  # fmt: skip
    return conf


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _rpc(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], suffix: str,
         method: str, code: str, **extra: str) -> float:  # fmt: skip
    for (name, labels), value in samples.items():
        got = dict(labels)
        if (
            name == f"rocketmq_rpc_latency{suffix}" and got.get("rpc_method") == method
            and got.get("response_code") == code and got.get("protocol_type") == "grpc"
            and all(got.get(k) == v for k, v in extra.items())
        ):  # fmt: skip
            return value
    raise AssertionError(f"no {suffix} sample for {method}/{code} {extra}")


async def _calls(port: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        for i in range(3):
            msg = message(TOPIC, f"MET{port}{i}", b"body", pb.MessageType.NORMAL)
            resp = await stub.SendMessage(
                spb.SendMessageRequest(messages=[msg]), metadata=meta("m@1"), timeout=TIMEOUT_S
            )
            assert resp.status.code == pb.Code.OK, resp.status.message
        msg = message("NoSuchMetricsTopic", "MISSING", b"body", pb.MessageType.NORMAL)
        resp = await stub.SendMessage(
            spb.SendMessageRequest(messages=[msg]), metadata=meta("m@1"), timeout=TIMEOUT_S
        )
        assert resp.status.code == pb.Code.TOPIC_NOT_FOUND, resp.status
        route = await stub.QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)), metadata=meta("m@1"),
            timeout=TIMEOUT_S,
        )  # fmt: skip
        assert route.status.code == pb.Code.OK, route.status.message


def _check_scrape(prom_port: int, mode: str) -> None:
    samples = _scrape(prom_port)
    up = [v for (n, labels), v in samples.items() if n == "rocketmq_proxy_up"
          and ("proxy_mode", mode) in labels and ("node_type", "proxy") in labels]  # fmt: skip
    assert up == [1.0]
    assert _rpc(samples, "_count", "SendMessage", "OK", node_type="proxy") == 3
    assert _rpc(samples, "_bucket", "SendMessage", "OK", le="+Inf") == 3
    assert _rpc(samples, "_sum", "SendMessage", "OK") > 0
    assert _rpc(samples, "_count", "SendMessage", "TOPIC_NOT_FOUND") == 1
    assert _rpc(samples, "_count", "QueryRoute", "OK") == 1


def _dumped(directory: Path) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for path in sorted(directory.glob("proxy-*"))
        # A line is complete once its newline is written; the text after the last one may be half.
        for line in path.read_text(encoding="utf-8").split("\n")[:-1]
        if line.strip()
    ]


async def _wait_dump(directory: Path, mode: str) -> dict[str, object]:
    """The first dumped record holding all four calls (one dumped between calls is skipped)."""
    want = {
        ("SendMessage", "OK"): 3,
        ("SendMessage", "TOPIC_NOT_FOUND"): 1,
        ("QueryRoute", "OK"): 1,
    }
    last: dict[str, object] = {}
    try:
        async with asyncio.timeout(10):
            while True:
                records = _dumped(directory) if directory.exists() else []
                last = records[-1] if records else last
                for record in reversed(records):
                    counts = {(r["method"], r["code"]): r["count"] for r in record["rpc"]}  # type: ignore[attr-defined]
                    if all(counts.get(key) == n for key, n in want.items()):
                        assert record["node"]["proxyMode"] == mode  # type: ignore[index]
                        return record
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"no dump in {directory} counts {want}; newest: {last}") from None


@pytest.fixture(scope="module")
def daemons(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, list[int], list[Daemon]]]:
    tmp = tmp_path_factory.mktemp("proxy-metrics")
    local_prom, cluster_prom = free_ports(2)
    namesrv, ns_addr = start_namesrv(tmp)
    started: list[Daemon] = [namesrv]
    try:
        broker, _ = start_broker(
            tmp, ns_addr, args=["--enable-proxy", "-pc", str(_conf(tmp, "local", local_prom))]
        )
        started.append(broker)
        local_port = int(broker.wait_for(BOOT).group(1))
        proxy = Daemon(
            [str(BIN / "mqproxy"), "-n", ns_addr, "-pc", str(_conf(tmp, "cluster", cluster_prom))],
            tmp / "logs-proxy",
        )
        started.append(proxy)
        cluster_port = int(proxy.wait_for(BOOT).group(1))
        create_topic(tmp, ns_addr, TOPIC, "NORMAL", queues=2)
        yield tmp, [local_port, local_prom, cluster_port, cluster_prom], started
    finally:
        codes = [d.stop() for d in reversed(started)]
        assert codes == [0] * len(codes), [d.tail(2000) for d in started]


@pytest.mark.parametrize("mode", ["local", "cluster"])
async def test_rpc_metrics_scraped_and_dumped(
    daemons: tuple[Path, list[int], list[Daemon]], mode: str
) -> None:
    tmp, ports, _ = daemons
    grpc_port, prom_port = ports[0:2] if mode == "local" else ports[2:4]
    async with asyncio.timeout(30):
        await _calls(grpc_port)
    await asyncio.to_thread(_check_scrape, prom_port, mode)
    await _wait_dump(tmp / f"dumps-{mode}", mode)
