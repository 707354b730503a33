"""The proxy's RPCs over real gRPC, against a real ``mqnamesrv`` + ``mqbroker``.

The proxy runs in the test's loop (``ProxyService`` over a ``ClusterBackend``, port 0) and is
called through our own generated stubs; the NameServer and broker are processes. Each RPC is
checked for the status code and fields upstream's proxy gives (proxy.md section 2).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest

from rocketpy.client.pull_api import PullStatus
from rocketpy.client.pull_consumer import PullConsumer
from rocketpy.proxy.cluster_backend import ClusterBackend
from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.grpc_server import ProxyService
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.pb import service_pb2_grpc
from tests.helpers.cluster import Cluster, start_cluster
from tests.helpers.processes import run_bin

pytestmark = pytest.mark.process

META = (("x-mq-client-id", "tester@1@0@abc"), ("x-mq-language", "PYTHON"))
TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A namesrv + broker with a NORMAL and a FIFO topic; 16 MiB commit-log segments so that a
    4 MiB message fits in one."""
    tmp = tmp_path_factory.mktemp("proxy")
    c = start_cluster(tmp, "mappedFileSizeCommitLog=16777216\n")
    try:
        for topic, kind in (("NormalTopic", "NORMAL"), ("FifoTopic", "FIFO")):
            done = run_bin(
                ["mqadmin", "updateTopic", "-n", c.namesrv_addr, "-c", "DefaultCluster",
                 "-t", topic, "-r", "4", "-w", "4", "-a", f"+message.type={kind}"],
                tmp,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
        yield c
    finally:
        c.stop()


@pytest.fixture
async def proxy(cluster: Cluster) -> AsyncIterator[ProxyService]:
    config = ProxyConfig.build(
        {"namesrvAddr": cluster.namesrv_addr, "grpcServerPort": 0, "bindAddress": "127.0.0.1",
         "grpcShutdownTimeSeconds": 1}
    )  # fmt: skip
    service = ProxyService(config, ClusterBackend(config))
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


@pytest.fixture
async def stub(proxy: ProxyService) -> AsyncIterator[service_pb2_grpc.MessagingServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}") as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)


def _endpoints(port: int = 1) -> pb.Endpoints:
    return pb.Endpoints(
        scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)]
    )


def _message(topic: str, i: int, **system: object) -> pb.Message:
    system.setdefault("message_type", pb.MessageType.NORMAL)
    return pb.Message(
        topic=pb.Resource(name=topic),
        body=f"body-{i}".encode(),
        user_properties={"index": str(i)},
        system_properties=pb.SystemProperties(
            message_id=f"MSGID{i:04d}", tag="TagA", keys=[f"key-{i}"],
            **system,  # type: ignore[arg-type]
        ),
    )  # fmt: skip


async def test_query_route_points_every_queue_at_the_proxy(
    stub: service_pb2_grpc.MessagingServiceStub, proxy: ProxyService
) -> None:
    req = spb.QueryRouteRequest(topic=pb.Resource(name="NormalTopic"), endpoints=_endpoints())
    resp = await stub.QueryRoute(req, metadata=META, timeout=TIMEOUT_S)
    assert resp.status.code == pb.Code.OK
    assert [q.id for q in resp.message_queues] == [0, 1, 2, 3]
    for q in resp.message_queues:
        assert q.permission == pb.Permission.READ_WRITE
        assert (q.broker.name, q.broker.id) == ("broker-a", 0)
        assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [
            ("127.0.0.1", proxy.port)
        ]
        assert list(q.accept_message_types) == [pb.MessageType.NORMAL]
    fifo = await stub.QueryRoute(
        spb.QueryRouteRequest(topic=pb.Resource(name="FifoTopic"), endpoints=_endpoints()),
        metadata=META, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert {tuple(q.accept_message_types) for q in fifo.message_queues} == {(pb.MessageType.FIFO,)}


async def test_query_route_refusals(stub: service_pb2_grpc.MessagingServiceStub) -> None:
    async def code(topic: str, meta: tuple[tuple[str, str], ...] = META) -> int:
        req = spb.QueryRouteRequest(topic=pb.Resource(name=topic), endpoints=_endpoints())
        resp = await stub.QueryRoute(req, metadata=meta, timeout=TIMEOUT_S)
        assert not resp.message_queues
        return int(resp.status.code)

    assert await code("NoSuchTopic") == pb.Code.TOPIC_NOT_FOUND
    assert await code("TBW102") == pb.Code.ILLEGAL_TOPIC
    assert await code("NormalTopic", (("x-mq-client-id", " "),)) == pb.Code.CLIENT_ID_REQUIRED


async def test_settings_heartbeat_and_termination(
    stub: service_pb2_grpc.MessagingServiceStub,
) -> None:
    hb = spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER)
    before = await stub.Heartbeat(hb, metadata=META, timeout=TIMEOUT_S)
    assert before.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE
    settings = pb.Settings(
        client_type=pb.ClientType.PRODUCER,
        publishing=pb.Publishing(topics=[pb.Resource(name="NormalTopic")]),
    )
    call = stub.Telemetry(metadata=META, timeout=TIMEOUT_S)
    await call.write(spb.TelemetryCommand(settings=settings))
    reply = await call.read()
    assert reply.status.code == pb.Code.OK
    assert reply.settings.publishing.max_body_size == 4 * 1024 * 1024
    assert reply.settings.backoff_policy.max_attempts == 3
    after = await stub.Heartbeat(hb, metadata=META, timeout=TIMEOUT_S)
    assert after.status.code == pb.Code.OK
    await call.done_writing()
    bye = await stub.NotifyClientTermination(
        spb.NotifyClientTerminationRequest(), metadata=META, timeout=TIMEOUT_S
    )
    assert bye.status.code == pb.Code.OK
    again = await stub.Heartbeat(hb, metadata=META, timeout=TIMEOUT_S)
    assert again.status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE


async def test_telemetry_without_pub_or_sub_is_invalid_argument(
    stub: service_pb2_grpc.MessagingServiceStub,
) -> None:
    call = stub.Telemetry(metadata=META, timeout=TIMEOUT_S)
    await call.write(spb.TelemetryCommand(settings=pb.Settings(client_type=pb.ClientType.PRODUCER)))
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await call.read()
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_send_message_ok_and_message_group_keeps_one_queue(
    stub: service_pb2_grpc.MessagingServiceStub,
) -> None:
    resp = await stub.SendMessage(
        spb.SendMessageRequest(messages=[_message("NormalTopic", 1)]),
        metadata=META,
        timeout=TIMEOUT_S,
    )
    assert resp.status.code == pb.Code.OK
    [entry] = resp.entries
    assert (entry.status.code, entry.message_id) == (pb.Code.OK, "MSGID0001")
    offsets = []
    for i in range(3):
        msg = _message("FifoTopic", i, message_group="order-42", message_type=pb.MessageType.FIFO)
        sent = await stub.SendMessage(
            spb.SendMessageRequest(messages=[msg]), metadata=META, timeout=TIMEOUT_S
        )
        assert sent.status.code == pb.Code.OK, sent.status.message
        offsets.append(sent.entries[0].offset)
    assert offsets == [offsets[0], offsets[0] + 1, offsets[0] + 2]  # one queue, in order


async def test_send_message_batch_is_one_send_with_one_entry(
    stub: service_pb2_grpc.MessagingServiceStub, cluster: Cluster
) -> None:
    """Several messages in one request go to one queue as one SEND_BATCH_MESSAGE: one entry whose
    message id joins the messages' ids (upstream's batch SendResult)."""
    msgs = [_message("NormalTopic", i) for i in (10, 11, 12)]
    resp = await stub.SendMessage(
        spb.SendMessageRequest(messages=msgs), metadata=META, timeout=TIMEOUT_S
    )
    assert resp.status.code == pb.Code.OK, resp.status.message
    [entry] = resp.entries
    assert entry.message_id == "MSGID0010,MSGID0011,MSGID0012"
    consumer = PullConsumer("proxy_batch_reader", cluster.namesrv_addr)
    await consumer.start()
    want = {f"MSGID00{i}" for i in (10, 11, 12)}
    stored: dict[str, tuple[int, int, bytes]] = {}
    try:
        async with asyncio.timeout(20):  # the consume queues catch up with the commit log
            while not want <= stored.keys():
                for queue in await consumer.fetch_queues("NormalTopic"):
                    result = await consumer.pull(queue, 0, max_nums=32, timeout_s=TIMEOUT_S)
                    for m in result.msgs if result.status == PullStatus.FOUND else []:
                        stored[m.msg_id] = (m.queue_id, m.queue_offset, m.body)
                if not want <= stored.keys():
                    await asyncio.sleep(0.2)
    finally:
        await consumer.shutdown()
    batch = [stored[f"MSGID00{i}"] for i in (10, 11, 12)]
    assert len({q for q, _, _ in batch}) == 1
    assert [o for _, o, _ in batch] == [entry.offset, entry.offset + 1, entry.offset + 2]
    assert [b for _, _, b in batch] == [b"body-10", b"body-11", b"body-12"]


async def test_send_message_g10_four_mib_body_ok_one_more_byte_refused(
    stub: service_pb2_grpc.MessagingServiceStub,
) -> None:
    """A 4 MiB body passes gRPC's inbound limit (raised to grpcMaxInboundMessageSize) and the
    proxy's maxMessageSize; one byte more is MESSAGE_BODY_TOO_LARGE."""
    limit = 4 * 1024 * 1024
    big = _message("NormalTopic", 20)
    big.body = b"x" * limit
    ok = await stub.SendMessage(spb.SendMessageRequest(messages=[big]), metadata=META, timeout=30)
    assert ok.status.code == pb.Code.OK, ok.status.message
    big.body = b"x" * (limit + 1)
    refused = await stub.SendMessage(
        spb.SendMessageRequest(messages=[big]), metadata=META, timeout=30
    )
    assert refused.status.code == pb.Code.MESSAGE_BODY_TOO_LARGE


async def test_send_message_refusals(stub: service_pb2_grpc.MessagingServiceStub) -> None:
    async def code(msg: pb.Message) -> int:
        resp = await stub.SendMessage(
            spb.SendMessageRequest(messages=[msg]), metadata=META, timeout=TIMEOUT_S
        )
        assert all(not e.message_id for e in resp.entries)
        return int(resp.status.code)

    fifo_on_normal = _message("NormalTopic", 1, message_group="g", message_type=pb.MessageType.FIFO)
    assert await code(fifo_on_normal) == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    empty = _message("NormalTopic", 2)
    empty.body = b""
    assert await code(empty) == pb.Code.MESSAGE_BODY_EMPTY
    assert await code(_message("NoSuchTopic", 3)) == pb.Code.TOPIC_NOT_FOUND
    assert await code(_message("SCHEDULE_TOPIC_XXXX", 4)) == pb.Code.ILLEGAL_TOPIC
    nothing = await stub.SendMessage(spb.SendMessageRequest(), metadata=META, timeout=TIMEOUT_S)
    assert nothing.status.code == pb.Code.MESSAGE_CORRUPTED


async def test_query_assignment_one_broker_wide_queue(
    stub: service_pb2_grpc.MessagingServiceStub, proxy: ProxyService
) -> None:
    req = spb.QueryAssignmentRequest(
        topic=pb.Resource(name="NormalTopic"), group=pb.Resource(name="G1"), endpoints=_endpoints()
    )
    resp = await stub.QueryAssignment(req, metadata=META, timeout=TIMEOUT_S)
    assert resp.status.code == pb.Code.OK
    [assignment] = resp.assignments
    assert assignment.message_queue.id == -1
    assert assignment.message_queue.broker.endpoints.addresses[0].port == proxy.port
    sys_group = spb.QueryAssignmentRequest(
        topic=pb.Resource(name="NormalTopic"), group=pb.Resource(name="CID_RMQ_SYS_X")
    )
    refused = await stub.QueryAssignment(sys_group, metadata=META, timeout=TIMEOUT_S)
    assert refused.status.code == pb.Code.ILLEGAL_CONSUMER_GROUP


async def test_unimplemented_rpcs_answer_not_implemented_in_their_status(
    stub: service_pb2_grpc.MessagingServiceStub,
) -> None:
    offset = await stub.UpdateOffset(spb.UpdateOffsetRequest(), metadata=META, timeout=TIMEOUT_S)
    assert offset.status.code == pb.Code.NOT_IMPLEMENTED
    recall = await stub.RecallMessage(spb.RecallMessageRequest(), metadata=META, timeout=TIMEOUT_S)
    assert recall.status.code == pb.Code.NOT_IMPLEMENTED
    stream = stub.PullMessage(spb.PullMessageRequest(), metadata=META, timeout=TIMEOUT_S)
    replies = [r async for r in stream]
    assert [r.status.code for r in replies] == [pb.Code.NOT_IMPLEMENTED]
    assert await stream.code() == grpc.StatusCode.OK


async def test_route_cache_serves_the_last_route_while_no_name_server_answers(
    tmp_path: Path,
) -> None:
    """With routes re-fetched on every query (refresh 0 s), a NameServer that went away leaves
    the last route in use instead of failing clients (``TopicRouteService``'s cache)."""
    c = start_cluster(tmp_path)
    config = ProxyConfig.build(
        {"namesrvAddr": c.namesrv_addr, "grpcServerPort": 0, "bindAddress": "127.0.0.1",
         "topicRouteServiceCacheRefreshSeconds": 0, "proxyRequestTimeoutMillis": 500}
    )  # fmt: skip
    service = ProxyService(config, ClusterBackend(config))
    await service.start()
    try:
        created = run_bin(
            ["mqadmin", "updateTopic", "-n", c.namesrv_addr, "-c", "DefaultCluster", "-t", "T1"],
            tmp_path,
        )
        assert created.returncode == 0, created.stdout + created.stderr
        async with grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            req = spb.QueryRouteRequest(topic=pb.Resource(name="T1"), endpoints=_endpoints())
            first = await stub.QueryRoute(req, metadata=META, timeout=TIMEOUT_S)
            assert first.status.code == pb.Code.OK
            assert c.namesrv.stop() == 0
            again = await stub.QueryRoute(req, metadata=META, timeout=TIMEOUT_S)
            assert again.status.code == pb.Code.OK
            assert again.message_queues == first.message_queues
            unknown = spb.QueryRouteRequest(topic=pb.Resource(name="T2"), endpoints=_endpoints())
            failed = await stub.QueryRoute(unknown, metadata=META, timeout=TIMEOUT_S)
            assert failed.status.code in (pb.Code.INTERNAL_SERVER_ERROR, pb.Code.PROXY_TIMEOUT)
    finally:
        await service.stop()
        assert c.broker.stop() == 0
        c.namesrv.stop()
