"""A DELAY message through the gRPC proxy: the proxy turns ``delivery_timestamp`` into
``TIMER_DELIVER_MS`` (proxy.md section 2) and the broker's timer delivers it at that time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from rocketpy.common.codes import ResponseCode
from rocketpy.proxy.cluster_backend import ClusterBackend
from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.grpc_server import ProxyService
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.pb import service_pb2_grpc
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.cluster import Cluster, start_cluster
from tests.helpers.processes import run_bin

pytestmark = pytest.mark.process

META = (("x-mq-client-id", "tester@1@0@abc"), ("x-mq-language", "PYTHON"))
TOPIC = "DelayTopic"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A namesrv + broker (timerPrecisionMs=100) with a one-queue DELAY topic."""
    tmp = tmp_path_factory.mktemp("proxy-timer")
    c = start_cluster(tmp, "timerPrecisionMs=100\n")
    try:
        done = run_bin(
            ["mqadmin", "updateTopic", "-n", c.namesrv_addr, "-c", "DefaultCluster", "-t", TOPIC,
             "-r", "1", "-w", "1", "-a", "+message.type=DELAY"],
            tmp,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        yield c
    finally:
        c.stop()


@pytest.fixture
async def stub(cluster: Cluster) -> AsyncIterator[service_pb2_grpc.MessagingServiceStub]:
    config = ProxyConfig.build(
        {"namesrvAddr": cluster.namesrv_addr, "grpcServerPort": 0, "bindAddress": "127.0.0.1",
         "grpcShutdownTimeSeconds": 1}
    )  # fmt: skip
    service = ProxyService(config, ClusterBackend(config))
    await service.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
            yield service_pb2_grpc.MessagingServiceStub(channel)
    finally:
        await service.stop()


async def test_proxy_delay_message_arrives_at_delivery_timestamp(
    cluster: Cluster, stub: service_pb2_grpc.MessagingServiceStub
) -> None:
    """1. SendMessage through the proxy: a DELAY message with delivery_timestamp 1.5 s ahead.
    Expected: OK; the topic is empty before that time and holds the message (TIMER_DELIVER_MS
    set by the proxy) within 0.6 s after it."""
    due_ms = int(time.time() * 1000) + 1500
    when = Timestamp(seconds=due_ms // 1000, nanos=due_ms % 1000 * 1_000_000)
    msg = pb.Message(
        topic=pb.Resource(name=TOPIC),
        body=b"later",
        system_properties=pb.SystemProperties(
            message_id="MSGIDTIMER0001", message_type=pb.MessageType.DELAY,
            delivery_timestamp=when,
        ),
    )  # fmt: skip
    resp = await stub.SendMessage(spb.SendMessageRequest(messages=[msg]), metadata=META, timeout=10)
    assert resp.status.code == pb.Code.OK, resp.status.message
    client = JavaLikeClient()
    try:
        async with asyncio.timeout(10):
            while True:
                pulled = await client.pull(cluster.broker_addr, "g", TOPIC, 0, expression="*")
                now = time.time() * 1000
                if pulled.code == ResponseCode.SUCCESS and pulled.body:
                    break
                assert now < due_ms + 600
                await asyncio.sleep(0.02)
    finally:
        await client.close()
    assert due_ms <= now <= due_ms + 600
    [record] = decode_records(pulled.body)
    assert record.body == b"later"
    assert record.properties["TIMER_DELIVER_MS"] == str(due_ms)
