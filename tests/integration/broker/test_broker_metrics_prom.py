"""The broker's Prometheus endpoint (metricsExporterType=PROM), scraped over loopback."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketpy.common.codes import RequestCode, ResponseCode
from tests.helpers.broker_client import JavaLikeClient, subscription
from tests.integration.broker.conftest import BrokerFactory, dispatched

pytestmark = pytest.mark.integration


async def _scrape(port: int, method: str = "GET") -> tuple[str, str]:
    async with asyncio.timeout(5):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"{method} /metrics HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        raw = await reader.read()
        writer.close()
        await writer.wait_closed()
    head, _, body = raw.decode().partition("\r\n\r\n")
    return head, body


def _samples(body: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


async def test_prom_exporter_serves_rocketmq_metrics(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Start a broker with metricsExporterType=PROM on 127.0.0.1 port 0. 2. Send 5 messages
    of 100 B to TopicP/0. 3. Heartbeat, pull them as group G, commit offset 2. 4. Scrape.
    Expected: 200 with the Prometheus text type; rocketmq_messages_in_total{topic=TopicP} 5 and
    rocketmq_throughput_in_total 500 with cluster/node_type/node_id labels; messages_out 5 for
    G; rocketmq_message_size count 5 all in the 1 KiB bucket; rocketmq_rpc_latency count 5;
    consumer lag 3 for G; flush/dispatch-behind gauges present. A POST gets 405."""
    broker = await broker_factory(
        metricsExporterType="PROM", metricsPromExporterHost="127.0.0.1", metricsPromExporterPort=0
    )
    assert broker.metrics.prom is not None
    port = broker.metrics.prom.port
    assert port > 0
    addr = broker.address
    for _ in range(5):
        assert (await client.send(addr, "TopicP", b"m" * 100)).code == ResponseCode.SUCCESS
    await dispatched(broker, "TopicP", 5)
    await client.heartbeat(addr, "G", (subscription("TopicP"),))
    pulled = await client.pull(addr, "G", "TopicP", 0)
    assert pulled.code == ResponseCode.SUCCESS
    update = {"consumerGroup": "G", "topic": "TopicP", "queueId": "0", "commitOffset": "2"}
    assert (await client.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, update)).code == 0
    head, body = await _scrape(port)
    assert head.startswith("HTTP/1.1 200 OK")
    assert "text/plain; version=0.0.4" in head
    samples = _samples(body)
    common = {("cluster", "DefaultCluster"), ("node_type", "broker"), ("node_id", "broker-a")}
    topic = frozenset({*common, ("topic", "TopicP")})
    group = frozenset({*topic, ("consumer_group", "G")})
    assert samples[("rocketmq_messages_in_total", topic)] == 5
    assert samples[("rocketmq_throughput_in_total", topic)] == 500
    assert samples[("rocketmq_messages_out_total", group)] == 5
    assert samples[("rocketmq_throughput_out_total", group)] > 500
    assert samples[("rocketmq_message_size_count", topic)] == 5
    assert samples[("rocketmq_message_size_bucket", frozenset({*topic, ("le", "1024.0")}))] == 5
    latency = frozenset({*common, ("protocol_type", "remoting"), ("request_code", "send_message")})
    assert samples[("rocketmq_rpc_latency_count", latency)] == 5
    assert samples[("rocketmq_consumer_lag_messages", group)] == 3
    assert ("rocketmq_storage_flush_behind_bytes", frozenset(common)) in samples
    assert samples[("rocketmq_storage_dispatch_behind_bytes", frozenset(common))] == 0
    head, _ = await _scrape(port, "POST")
    assert head.startswith("HTTP/1.1 405")


async def test_prom_exporter_off_by_default_and_stops_with_broker(
    broker_factory: BrokerFactory,
) -> None:
    """1. Start a broker without metricsExporterType, and one with PROM on port 0. 2. Stop the
    second. Expected: the first has no exporter; after stop the second's port refuses
    connections."""
    plain = await broker_factory()
    assert plain.metrics.prom is None
    prom = await broker_factory(
        brokerName="broker-b",
        metricsExporterType="PROM",
        metricsPromExporterHost="127.0.0.1",
        metricsPromExporterPort=0,
    )
    assert prom.metrics.prom is not None
    port = prom.metrics.prom.port
    await prom.stop()

    async def refused() -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return True
        writer.close()
        return False

    async with asyncio.timeout(5):
        assert await refused()
