"""Transactions through the proxy in Cluster mode, over real gRPC, against real processes.

``mqnamesrv`` and ``mqbroker`` (check-back every 300 ms for half messages older than 1 s) run as
processes; the proxy (``ProxyService`` over a ``ClusterBackend``, port 0) runs in the test's
loop, so the broker's CHECK_TRANSACTION_STATE crosses a real remoting connection to it. The
scenario (``tests/helpers/grpc_proxy.py``): commit, rollback, and an open half message checked
back over Telemetry and committed with SOURCE_SERVER_CHECK; then the consumer-group side
(QueryAssignment and consumer Settings follow the group's config read with
GET_SUBSCRIPTIONGROUP_CONFIG).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import grpc
import pytest

from rocketpy.proxy.cluster_backend import ClusterBackend
from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.grpc_server import ProxyService
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.pb import service_pb2_grpc
from tests.helpers.cluster import Cluster, start_cluster
from tests.helpers.grpc_proxy import (
    TIMEOUT_S,
    create_topic,
    endpoints,
    meta,
    transaction_scenario,
)
from tests.helpers.processes import run_bin

pytestmark = pytest.mark.process

TXN_EXTRA = "transactionCheckInterval=300\ntransactionTimeOut=1000\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("proxy-txn")
    c = start_cluster(tmp, TXN_EXTRA)
    try:
        create_topic(tmp, c.namesrv_addr, "TxnTopic", "TRANSACTION")
        create_topic(tmp, c.namesrv_addr, "GroupTopic", "FIFO", queues=3)
        for group, orderly in (("OrderlyGroup", "true"), ("PlainGroup", "false")):
            done = run_bin(
                ["mqadmin", "updateSubGroup", "-n", c.namesrv_addr, "-c", "DefaultCluster",
                 "-g", group, "-o", orderly, "-r", "5"],
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


async def test_commit_rollback_and_check_back_through_the_proxy(
    stub: service_pb2_grpc.MessagingServiceStub, cluster: Cluster
) -> None:
    await transaction_scenario(stub, cluster.namesrv_addr, "TxnTopic")


async def test_group_config_decides_fifo_assignments_and_consumer_settings(
    stub: service_pb2_grpc.MessagingServiceStub,
) -> None:
    """An orderly group (``updateSubGroup -o true -r 5``) gets one assignment per read queue and
    Settings with fifo and 6 attempts; a plain group one broker-wide queue (-1), not fifo."""

    async def assigned(group: str) -> list[int]:
        resp = await stub.QueryAssignment(
            spb.QueryAssignmentRequest(
                topic=pb.Resource(name="GroupTopic"), group=pb.Resource(name=group),
                endpoints=endpoints(),
            ),
            metadata=meta("assign@1"), timeout=TIMEOUT_S,
        )  # fmt: skip
        assert resp.status.code == pb.Code.OK, resp.status.message
        return [a.message_queue.id for a in resp.assignments]

    assert await assigned("OrderlyGroup") == [0, 1, 2]
    assert await assigned("PlainGroup") == [-1]

    async def settings(group: str) -> pb.Settings:
        call = stub.Telemetry(metadata=meta(f"consumer@{group}"), timeout=TIMEOUT_S)
        sub = pb.Subscription(
            group=pb.Resource(name=group),
            subscriptions=[
                pb.SubscriptionEntry(
                    topic=pb.Resource(name="GroupTopic"),
                    expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
                )
            ],
        )
        await call.write(
            spb.TelemetryCommand(
                settings=pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=sub)
            )
        )
        reply = await call.read()
        call.cancel()
        assert reply.status.code == pb.Code.OK
        return reply.settings

    orderly = await settings("OrderlyGroup")
    assert orderly.subscription.fifo
    assert orderly.backoff_policy.max_attempts == 6
    plain = await settings("PlainGroup")
    assert not plain.subscription.fifo
    assert plain.backoff_policy.max_attempts == 6
