"""Driving the proxy over real gRPC with our own stubs: messages, topics, reading back, and the
transaction scenario both proxy modes must pass (commit, rollback, check-back over Telemetry)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from rocketpy.client.message import MessageExt
from rocketpy.client.pull_api import PullStatus
from rocketpy.client.pull_consumer import PullConsumer
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.pb import service_pb2_grpc
from tests.helpers.processes import run_bin

TIMEOUT_S = 10.0


def meta(client_id: str) -> tuple[tuple[str, str], ...]:
    """The call metadata of a Python 5.x client with ``client_id``."""
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))


def endpoints(port: int = 1) -> pb.Endpoints:
    """``127.0.0.1:<port>`` as the client's access point."""
    return pb.Endpoints(
        scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)]
    )


def message(topic: str, msg_id: str, body: bytes, kind: pb.MessageType) -> pb.Message:
    """One message as a Python producer sends it (tag ``TagA``, key = id, born now: a broker
    discards a half message born longer ago than its files are kept)."""
    msg = pb.Message(
        topic=pb.Resource(name=topic),
        body=body,
        user_properties={"id": msg_id},
        system_properties=pb.SystemProperties(
            message_id=msg_id, tag="TagA", keys=[msg_id], message_type=kind
        ),
    )
    msg.system_properties.born_timestamp.GetCurrentTime()
    return msg


def create_topic(tmp: Path, namesrv: str, topic: str, kind: str, queues: int = 2) -> None:
    """``mqadmin updateTopic`` with ``+message.type=<kind>`` on DefaultCluster."""
    done = run_bin(
        ["mqadmin", "updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", topic,
         "-r", str(queues), "-w", str(queues), "-a", f"+message.type={kind}"],
        tmp,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


async def pull_all(namesrv: str, topic: str, group: str) -> list[MessageExt]:
    """Every message of ``topic`` now, through our remoting pull consumer."""
    consumer = PullConsumer(group, namesrv)
    await consumer.start()
    got: list[MessageExt] = []
    try:
        async with asyncio.timeout(30):
            for queue in await consumer.fetch_queues(topic):
                offset = 0
                while True:
                    result = await consumer.pull(queue, offset, max_nums=32, timeout_s=TIMEOUT_S)
                    if result.status != PullStatus.FOUND:
                        break
                    got.extend(result.msgs)
                    offset = result.next_begin_offset
    finally:
        await consumer.shutdown()
    return got


async def send_half(
    stub: service_pb2_grpc.MessagingServiceStub, client_id: str, topic: str, msg_id: str
) -> spb.SendResultEntry:
    """SendMessage of one TRANSACTION message; its entry (asserted OK)."""
    msg = message(topic, msg_id, f"body-{msg_id}".encode(), pb.MessageType.TRANSACTION)
    resp = await stub.SendMessage(
        spb.SendMessageRequest(messages=[msg]), metadata=meta(client_id), timeout=TIMEOUT_S
    )
    assert resp.status.code == pb.Code.OK, resp.status.message
    [entry] = resp.entries
    assert entry.message_id == msg_id
    assert entry.transaction_id
    return entry


async def end(  # noqa: PLR0917 - EndTransaction's fields
    stub: service_pb2_grpc.MessagingServiceStub, client_id: str, topic: str, msg_id: str,
    transaction_id: str, resolution: pb.TransactionResolution, source: pb.TransactionSource,
) -> int:  # fmt: skip
    """EndTransaction; its status code."""
    resp = await stub.EndTransaction(
        spb.EndTransactionRequest(
            topic=pb.Resource(name=topic), message_id=msg_id, transaction_id=transaction_id,
            resolution=resolution, source=source,
        ),
        metadata=meta(client_id), timeout=TIMEOUT_S,
    )  # fmt: skip
    return int(resp.status.code)


async def wait_bodies(namesrv: str, topic: str, want: set[bytes], group: str) -> set[bytes]:
    """Pull ``topic`` until it holds ``want`` (at most 30 s); the bodies it holds then."""
    got: set[bytes] = set()
    async with asyncio.timeout(30):
        while got != want:
            got = {m.body for m in await pull_all(namesrv, topic, group)}
            if got != want:
                await asyncio.sleep(0.3)
    return got


async def transaction_scenario(
    stub: service_pb2_grpc.MessagingServiceStub, namesrv: str, topic: str
) -> None:
    """1. A producer's Telemetry Settings publish ``topic`` (TRANSACTION). 2. Half message A is
    committed, B rolled back (SOURCE_CLIENT); an EndTransaction with an unknown id fails and a
    blank one is INVALID_TRANSACTION_ID. 3. Half message C is left open: the broker checks it
    back, the proxy writes ``recover_orphaned_transaction_command`` (C, its transaction id, type
    TRANSACTION, MD5 digest) on the Telemetry stream; the answer (COMMIT, SOURCE_SERVER_CHECK)
    is OK. 4. The topic then holds exactly A and C."""
    client = f"txn-producer@{topic}"
    call = stub.Telemetry(metadata=meta(client), timeout=60)
    settings = pb.Settings(
        client_type=pb.ClientType.PRODUCER,
        publishing=pb.Publishing(topics=[pb.Resource(name=topic)]),
    )
    await call.write(spb.TelemetryCommand(settings=settings))
    reply = await asyncio.wait_for(call.read(), TIMEOUT_S)
    assert reply.status.code == pb.Code.OK
    client_src, check_src = (
        pb.TransactionSource.SOURCE_CLIENT,
        pb.TransactionSource.SOURCE_SERVER_CHECK,
    )
    commit, rollback = pb.TransactionResolution.COMMIT, pb.TransactionResolution.ROLLBACK
    a = await send_half(stub, client, topic, "TXA")
    b = await send_half(stub, client, topic, "TXB")
    assert await end(stub, client, topic, "TXA", a.transaction_id, commit, client_src) == pb.Code.OK
    assert (
        await end(stub, client, topic, "TXB", b.transaction_id, rollback, client_src) == pb.Code.OK
    )
    # the record is gone once ended
    again = await end(stub, client, topic, "TXA", a.transaction_id, commit, client_src)
    assert again == pb.Code.INTERNAL_SERVER_ERROR
    assert (
        await end(stub, client, topic, "TXA", " ", commit, client_src)
        == pb.Code.INVALID_TRANSACTION_ID
    )
    c = await send_half(stub, client, topic, "TXC")
    async with asyncio.timeout(30):
        while True:
            command = await call.read()
            assert command is not grpc.aio.EOF, "telemetry stream ended"
            if command.HasField("recover_orphaned_transaction_command"):
                break
    recover = command.recover_orphaned_transaction_command
    assert recover.transaction_id == c.transaction_id
    assert recover.message.system_properties.message_id == "TXC"
    assert recover.message.system_properties.message_type == pb.MessageType.TRANSACTION
    assert recover.message.body == b"body-TXC"
    assert recover.message.system_properties.body_digest.type == pb.DigestType.MD5
    assert recover.message.user_properties["id"] == "TXC"
    code = await end(stub, client, topic, "TXC", recover.transaction_id, commit, check_src)
    assert code == pb.Code.OK
    got = await wait_bodies(namesrv, topic, {b"body-TXA", b"body-TXC"}, f"reader_{topic}")
    assert got == {b"body-TXA", b"body-TXC"}
    call.cancel()
