"""Local mode: ``mqbroker --enable-proxy -pc rmq-proxy.json``, one process serving gRPC too.

1. ``mqnamesrv`` and ``mqbroker --enable-proxy`` (gRPC port 0 on 127.0.0.1) run as processes;
the broker prints its boot line, then the proxy's with ``proxyMode=local`` and the bound port.
2. Topics created with ``mqadmin``. 3. Over real gRPC: QueryRoute points every queue at the proxy's
port; SendMessage stores NORMAL messages (read back with our remoting pull consumer: body, tag,
key, UNIQ_KEY, PGROUP); the transaction scenario of ``tests/helpers/grpc_proxy.py`` (commit,
rollback, and a check-back that the broker sends on its in-process channel to the proxy, relayed
over Telemetry); consumption over POP on the in-process channel (a long-polled ReceiveMessage
woken by a send, every message once, AckMessage, then nothing). 4. SIGTERM stops the proxy before
the broker, exit 0. Also: ``mqproxy -pm local`` is refused (Local mode lives in the broker).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from rocketpy.client.message import MessageExt
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.pb import service_pb2_grpc
from tests.helpers.grpc_proxy import (
    TIMEOUT_S,
    create_topic,
    message,
    meta,
    pull_all,
    transaction_scenario,
)
from tests.helpers.processes import BIN, Daemon, run_bin, start_broker, start_namesrv
from tests.helpers.proxy import GrpcConsumer

pytestmark = pytest.mark.process

LOCAL_BOOT = re.compile(
    r"rocketmq-proxy startup successfully, grpc address 127\.0\.0\.1:(\d+), proxyMode=local"
    r" and name server is (\S+)"
)
TXN_EXTRA = "transactionCheckInterval=300\ntransactionTimeOut=1000\n"


@dataclass
class Local:
    namesrv: Daemon
    namesrv_addr: str
    broker: Daemon
    grpc_port: int
    logs: Path


def write_proxy_conf(tmp: Path) -> Path:
    """``rmq-proxy.json`` for tests: port 0 on loopback, 1 s shutdown."""
    conf = tmp / "rmq-proxy.json"
    conf.write_text(
        json.dumps({"grpcServerPort": 0, "bindAddress": "127.0.0.1", "grpcShutdownTimeSeconds": 1}),
        encoding="utf-8",
    )
    return conf


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    tmp = tmp_path_factory.mktemp("proxy-local")
    namesrv, ns_addr = start_namesrv(tmp)
    broker = None
    try:
        broker, _ = start_broker(
            tmp, ns_addr, extra=TXN_EXTRA,
            args=["--enable-proxy", "-pc", str(write_proxy_conf(tmp))],
        )  # fmt: skip
        match = broker.wait_for(LOCAL_BOOT)
        assert match.group(2) == ns_addr
        create_topic(tmp, ns_addr, "LocalTopic", "NORMAL", queues=4)
        create_topic(tmp, ns_addr, "LocalTxnTopic", "TRANSACTION")
        create_topic(tmp, ns_addr, "LocalConsumeTopic", "NORMAL", queues=4)
        yield Local(namesrv, ns_addr, broker, int(match.group(1)), tmp / "logs")
    finally:
        codes = [d.stop() for d in (broker, namesrv) if d is not None]
        assert codes == [0] * len(codes), broker.tail(3000) if broker else ""
    out = broker.output()
    assert out.index("grpc server stopped") < out.index("broker shutdown")


@pytest.fixture
async def stub(local: Local) -> AsyncIterator[service_pb2_grpc.MessagingServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{local.grpc_port}") as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)


async def test_local_mode_route_and_send(
    stub: service_pb2_grpc.MessagingServiceStub, local: Local
) -> None:
    # The client came in as "localhost": Local mode answers with the broker's own host instead.
    asked = pb.Endpoints(
        scheme=pb.AddressScheme.DOMAIN_NAME, addresses=[pb.Address(host="localhost", port=1)]
    )
    route = await stub.QueryRoute(
        spb.QueryRouteRequest(topic=pb.Resource(name="LocalTopic"), endpoints=asked),
        metadata=meta("local@1"), timeout=TIMEOUT_S,
    )  # fmt: skip
    assert route.status.code == pb.Code.OK, route.status.message
    assert [q.id for q in route.message_queues] == [0, 1, 2, 3]
    for q in route.message_queues:
        assert (q.broker.name, q.broker.id) == ("broker-a", 0)
        assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [
            ("127.0.0.1", local.grpc_port)
        ]
    offsets = []
    for i in range(8):
        msg = message("LocalTopic", f"LOCAL{i}", f"body-{i}".encode(), pb.MessageType.NORMAL)
        resp = await stub.SendMessage(
            spb.SendMessageRequest(messages=[msg]), metadata=meta("local@1"), timeout=TIMEOUT_S
        )
        assert resp.status.code == pb.Code.OK, resp.status.message
        [entry] = resp.entries
        assert entry.message_id == f"LOCAL{i}"
        offsets.append(entry.offset)
    stored: dict[str, MessageExt] = {}
    async with asyncio.timeout(20):  # the consume queues catch up with the commit log
        while len(stored) < 8:
            got = await pull_all(local.namesrv_addr, "LocalTopic", "local_reader")
            stored = {m.msg_id: m for m in got}
            await asyncio.sleep(0 if len(stored) == 8 else 0.2)
    assert sorted(stored) == [f"LOCAL{i}" for i in range(8)]
    for i in range(8):
        m = stored[f"LOCAL{i}"]
        assert m.body == f"body-{i}".encode()
        assert (m.tags, m.keys) == ("TagA", f"LOCAL{i}")
        assert m.properties["PGROUP"] == "LocalTopic"
    assert len({m.queue_id for m in stored.values()}) == 4  # round robin over the write queues


async def test_local_mode_transactions_and_check_back(
    stub: service_pb2_grpc.MessagingServiceStub, local: Local
) -> None:
    await transaction_scenario(stub, local.namesrv_addr, "LocalTxnTopic")
    # The ends came over the in-process channel (pseudo peer port 1), not a socket.
    log = (local.logs / "broker.log").read_text(encoding="utf-8")
    assert '"producer": "127.0.0.1:1", "commit": true, "from_check": true, "msg_id": "TXC"' in log


async def test_local_mode_receive_and_ack(
    stub: service_pb2_grpc.MessagingServiceStub, local: Local
) -> None:
    """POP_MESSAGE, ACK_MESSAGE go to the broker's processors on the in-process channel: an
    empty pop is answered later (long polling) on that channel, a send wakes it."""
    topic = "LocalConsumeTopic"
    consumer = GrpcConsumer(stub, "local-consumer@1", "LocalConsumeGroup", topic)
    await consumer.open()
    try:
        empty = await consumer.receive(poll_s=5)  # the group's first pop: offsets at the end
        assert (empty.status.code, empty.messages) == (pb.Code.MESSAGE_NOT_FOUND, [])
        started = time.monotonic()
        receiving = asyncio.create_task(consumer.receive(poll_s=15))
        await asyncio.sleep(1.0)
        for i in range(6):
            msg = message(topic, f"LC{i}", f"body-{i}".encode(), pb.MessageType.NORMAL)
            resp = await stub.SendMessage(
                spb.SendMessageRequest(messages=[msg]), metadata=meta("local@2"), timeout=TIMEOUT_S
            )
            assert resp.status.code == pb.Code.OK, resp.status.message
        first = await asyncio.wait_for(receiving, 20)
        assert first.status.code == pb.Code.OK, first.status.message
        assert first.messages
        assert time.monotonic() - started < 8  # woken by the send, not the poll's end
        got = list(first.messages) + await consumer.receive_until(6 - len(first.messages))
        assert sorted(m.system_properties.message_id for m in got) == [f"LC{i}" for i in range(6)]
        for m in got:
            sp = m.system_properties
            assert m.body == f"body-{sp.message_id[2:]}".encode()
            assert (sp.tag, sp.delivery_attempt) == ("TagA", 1)
            assert sp.receipt_handle.split(" ")[5] == "broker-a"
        acked = await consumer.ack_messages(got)
        assert acked.status.code == pb.Code.OK, acked.status.message
        assert [e.status.code for e in acked.entries] == [pb.Code.OK] * 6
        after = await consumer.receive(invisible_s=10, poll_s=5)
        assert (after.status.code, after.messages) == (pb.Code.MESSAGE_NOT_FOUND, [])
    finally:
        await consumer.close()


def test_mqproxy_refuses_local_mode(tmp_path: Path) -> None:
    done = run_bin(["mqproxy", "-n", "127.0.0.1:1", "-pm", "local"], tmp_path)
    assert done.returncode == 2
    assert "mqbroker --enable-proxy" in done.stderr
    assert (BIN / "mqbroker").exists()
