"""Consumption through ``bin/mqproxy`` over real gRPC: ReceiveMessage, AckMessage,
ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue (proxy.md sections 2, 3.2, 6 G1/G3/G4/G5).

Processes: ``mqnamesrv`` + ``mqbroker`` (``reviveInterval=100``: redeliveries come ~1 s after the
invisible time) + ``mqproxy``, one set per module; every test has its own topic and group and
its own client id. Messages are sent through the proxy's SendMessage; the consumer side is
:class:`~tests.helpers.proxy.GrpcConsumer` on our generated stubs (what the 5.x SimpleConsumer
does on the wire). The broker SIGKILL test starts its own processes.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketpy.client.pull_api import PullStatus
from rocketpy.client.pull_consumer import PullConsumer
from rocketpy.common.fastjson import loads
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.pb import service_pb2_grpc
from tests.helpers.cluster import unique
from tests.helpers.processes import Daemon, run_bin, start_broker, start_namesrv
from tests.helpers.proxy import GrpcConsumer, proxy_channel, start_proxy

pytestmark = pytest.mark.process

BROKER_EXTRA = "reviveInterval=100\nflushConsumerOffsetInterval=100\nautoCreateTopicEnable=false\n"
PRODUCER_META = (("x-mq-client-id", "producer@1@0@abc"), ("x-mq-language", "PYTHON"))
TIMEOUT_S = 10.0
#: Auto renew in seconds instead of minutes: an ``auto_renew`` receive is invisible for 4 s, and
#: handles within 3 s of expiry are renewed (to 1 min) every 0.5 s.
RENEW_FAST = {
    "renewSliceTimeMillis": 4000, "renewAheadTimeMillis": 3000, "renewSchedulePeriodMillis": 500,
}  # fmt: skip


@dataclass
class Env:
    """The module's processes."""

    tmp: Path
    namesrv_addr: str
    broker: Daemon
    proxy: Daemon
    port: int


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("proxy_consume")
    namesrv, ns_addr = start_namesrv(tmp)
    daemons = [namesrv]
    try:
        broker, _ = start_broker(tmp, ns_addr, extra=BROKER_EXTRA)
        daemons.append(broker)
        proxy, port = start_proxy(tmp, ns_addr, RENEW_FAST)
        daemons.append(proxy)
        yield Env(tmp, ns_addr, broker, proxy, port)
    finally:
        codes = [d.stop() for d in reversed(daemons)]
    assert codes == [0] * len(codes), daemons[-1].tail(3000)


def create_topic(env: Env, kind: str = "NORMAL", queues: int = 4) -> str:
    return create_topic_at(env.namesrv_addr, env.tmp, kind, queues)


def create_topic_at(namesrv: str, tmp: Path, kind: str = "NORMAL", queues: int = 4) -> str:
    topic = unique(f"Consume{kind}")
    done = run_bin(
        ["mqadmin", "updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", topic,
         "-r", str(queues), "-w", str(queues), "-a", f"+message.type={kind}"],
        tmp,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return topic


@pytest.fixture
async def stub(env: Env) -> AsyncIterator[service_pb2_grpc.MessagingServiceStub]:
    async with proxy_channel(env.port) as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)


@pytest.fixture
async def opened() -> AsyncIterator[list[GrpcConsumer]]:
    """Consumers a test opens; their Telemetry streams are closed after it."""
    made: list[GrpcConsumer] = []
    yield made
    for consumer in made:
        await consumer.close()


def create_group(env: Env, *, orderly: bool = False, retry_max_times: int = 16) -> str:
    """A consumer group made with ``mqadmin updateSubGroup``: the proxy takes FIFO and max
    attempts from its config (GET_SUBSCRIPTIONGROUP_CONFIG), not from the client."""
    group = unique("cg")
    done = run_bin(
        ["mqadmin", "updateSubGroup", "-n", env.namesrv_addr, "-c", "DefaultCluster", "-g", group,
         "-o", str(orderly).lower(), "-r", str(retry_max_times)],
        env.tmp,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return group


async def consumer_for(
    stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer], topic: str,
    group: str | None = None, **kw: object,
) -> GrpcConsumer:  # fmt: skip
    consumer = GrpcConsumer(stub, unique("client@1@0"), group or unique("cg"), topic, **kw)  # type: ignore[arg-type]
    await consumer.open()
    opened.append(consumer)
    return consumer


async def send(
    stub: service_pb2_grpc.MessagingServiceStub, topic: str, indexes: range, **system: object
) -> list[str]:
    """Send one message per index through the proxy; their message ids."""
    system.setdefault("message_type", pb.MessageType.NORMAL)
    ids = []
    for i in indexes:
        msg_id = f"{topic}-{i:05d}"
        msg = pb.Message(
            topic=pb.Resource(name=topic),
            body=f"body-{i}".encode(),
            user_properties={"index": str(i)},
            system_properties=pb.SystemProperties(
                message_id=msg_id,
                tag="TagA",
                keys=[f"key-{i}", "k2"],
                born_timestamp={"seconds": int(time.time())},
                born_host="10.0.0.7",
                **system,  # type: ignore[arg-type]
            ),
        )
        resp = await stub.SendMessage(
            spb.SendMessageRequest(messages=[msg]), metadata=PRODUCER_META, timeout=TIMEOUT_S
        )
        assert resp.status.code == pb.Code.OK, resp.status.message
        ids.append(msg_id)
    return ids


def handle_fields(msg: pb.Message) -> list[str]:
    return msg.system_properties.receipt_handle.split(" ")


async def test_receive_converts_and_ack_removes(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    """G1 in small: each message once with the fields sent, the stream's order status ->
    messages -> delivery timestamp, a 9-field handle, every ack OK, then nothing."""
    topic = create_topic(env)
    consumer = await consumer_for(stub, opened, topic)
    ids = await send(stub, topic, range(12))
    got = await consumer.receive_until(12)
    assert sorted(m.system_properties.message_id for m in got) == ids
    first = await consumer.receive(poll_s=5)  # all taken: nothing left, after the long poll
    assert first.status.code == pb.Code.MESSAGE_NOT_FOUND
    assert first.responses[-1].WhichOneof("content") == "delivery_timestamp"
    for msg in got:
        sp = msg.system_properties
        i = int(msg.user_properties["index"])
        assert msg.topic.name == topic
        assert msg.body == f"body-{i}".encode()
        assert dict(msg.user_properties) == {"index": str(i)}
        assert (sp.tag, list(sp.keys)) == ("TagA", [f"key-{i}", "k2"])
        assert sp.body_digest.type == pb.DigestType.MD5
        assert sp.body_digest.checksum == hashlib.md5(msg.body).hexdigest().upper()  # noqa: S324
        assert sp.message_type == pb.MessageType.NORMAL
        assert sp.delivery_attempt == 1
        assert sp.born_host == "10.0.0.7"
        assert sp.store_host.startswith("127.0.0.1:")
        assert abs(sp.born_timestamp.seconds - time.time()) < 60
        assert abs(sp.store_timestamp.seconds - time.time()) < 60
        assert sp.invisible_duration.seconds == 30
        fields = handle_fields(msg)
        assert len(fields) == 9
        assert (fields[2], fields[4], fields[5]) == ("30000", "0", "broker-a")
        assert (int(fields[6]), int(fields[7])) == (sp.queue_id, sp.queue_offset)
        assert int(fields[8]) >= 0  # the commit-log offset the proxy appended
    acked = await consumer.ack_messages(got)
    assert acked.status.code == pb.Code.OK
    assert [e.status.code for e in acked.entries] == [pb.Code.OK] * len(got)
    assert {e.message_id for e in acked.entries} == set(ids)
    again = await consumer.receive(poll_s=5)
    assert (again.status.code, again.messages) == (pb.Code.MESSAGE_NOT_FOUND, [])


async def test_stream_order_when_found(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    topic = create_topic(env, queues=1)
    consumer = await consumer_for(stub, opened, topic)
    await send(stub, topic, range(3))
    receipt = await consumer.receive(batch=2)
    kinds = [r.WhichOneof("content") for r in receipt.responses]
    assert kinds == ["status", "message", "message", "delivery_timestamp"]
    assert receipt.status.code == pb.Code.OK
    assert abs(receipt.responses[-1].delivery_timestamp.seconds - time.time()) < 5


async def test_invisible_expiry_redelivers_with_attempt_two(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    """G3: not acked within 10 s -> back with delivery_attempt 2; the old handle is refused
    without a broker call, the new one acks, and the message is never seen again."""
    topic = create_topic(env)
    consumer = await consumer_for(stub, opened, topic)
    [msg_id] = await send(stub, topic, range(1))
    [first] = await consumer.receive_until(1, invisible_s=10)
    popped_at = time.monotonic()
    again: list[pb.Message] = []
    while not again and time.monotonic() - popped_at < 20:
        again = (await consumer.receive(invisible_s=30, poll_s=5)).messages
    waited = time.monotonic() - popped_at
    assert [m.system_properties.message_id for m in again] == [msg_id]
    assert 9 <= waited <= 17, waited
    second = again[0]
    assert second.system_properties.delivery_attempt == 2
    assert (second.topic.name, second.body) == (topic, first.body)
    old = await consumer.ack((msg_id, first.system_properties.receipt_handle))
    assert old.status.code == pb.Code.INVALID_RECEIPT_HANDLE
    assert old.entries[0].status.message == "receipt handle is expired"
    new = await consumer.ack((msg_id, second.system_properties.receipt_handle))
    assert new.status.code == pb.Code.OK, new.status.message
    after = await consumer.receive(invisible_s=10, poll_s=5)
    assert after.messages == []


async def test_change_invisible_duration_extends_and_new_handle_acks(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    """G4: invisible 10 s changed to 30 s: not back at 15 s; the returned handle acks."""
    topic = create_topic(env)
    consumer = await consumer_for(stub, opened, topic)
    [msg_id] = await send(stub, topic, range(1))
    [msg] = await consumer.receive_until(1, invisible_s=10)
    started = time.monotonic()
    changed = await consumer.change(msg_id, msg.system_properties.receipt_handle, 30)
    assert changed.status.code == pb.Code.OK, changed.status.message
    fields = changed.receipt_handle.split(" ")
    old = handle_fields(msg)
    assert fields[0] == fields[7] == old[7]  # one checkpoint for this message
    assert (fields[2], fields[8]) == ("30000", old[8])
    while time.monotonic() - started < 15:
        assert (await consumer.receive(invisible_s=10, poll_s=5)).messages == []
    acked = await consumer.ack((msg_id, changed.receipt_handle))
    assert acked.status.code == pb.Code.OK, acked.status.message


async def test_refusals(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    """Garbled and expired handles, invisible times out of bounds, a deadline too short for
    long polling, a client without Settings."""
    topic = create_topic(env)
    consumer = await consumer_for(stub, opened, topic)
    garbled = await consumer.ack(("id", "not a handle"))
    assert garbled.status.code == pb.Code.INVALID_RECEIPT_HANDLE
    expired = await consumer.change("id", "0 1000 10000 0 0 broker-a 0 0 0", 30)
    assert (expired.status.code, expired.receipt_handle) == (pb.Code.INVALID_RECEIPT_HANDLE, "")
    too_short = await consumer.receive(invisible_s=1)
    assert too_short.status.code == pb.Code.ILLEGAL_INVISIBLE_TIME
    too_long = await consumer.change("id", "0 1000 10000 0 0 broker-a 0 0 0", 13 * 3600)
    assert too_long.status.code == pb.Code.ILLEGAL_INVISIBLE_TIME
    req = spb.ReceiveMessageRequest(
        group=pb.Resource(name=consumer.group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic)),
        batch_size=1, invisible_duration={"seconds": 30}, long_polling_timeout={"seconds": 20},
    )  # fmt: skip
    polling = [r async for r in stub.ReceiveMessage(req, metadata=consumer.meta, timeout=3)]
    assert polling[0].status.code == pb.Code.ILLEGAL_POLLING_TIME
    stranger = (("x-mq-client-id", "nobody@1@0@x"), ("x-mq-language", "PYTHON"))
    unknown = [r async for r in stub.ReceiveMessage(req, metadata=stranger, timeout=10)]
    assert unknown[0].status.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE


async def test_receive_waits_for_settings_still_in_flight(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    """The 5.x clients do not wait for the Settings answer before their first receive: a
    ReceiveMessage that overtakes the Settings by a moment is served, not refused."""
    topic = create_topic(env)
    consumer = GrpcConsumer(stub, unique("client@3@0"), unique("cg"), topic)
    [msg_id] = await send(stub, topic, range(1))
    receiving = asyncio.create_task(consumer.receive(poll_s=5))
    await asyncio.sleep(0.3)
    await consumer.open()
    opened.append(consumer)
    receipt = await asyncio.wait_for(receiving, 15)
    assert receipt.status.code == pb.Code.OK, receipt.status
    assert [m.system_properties.message_id for m in receipt.messages] == [msg_id]


async def test_long_polling_is_woken_by_a_send(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    topic = create_topic(env)
    consumer = await consumer_for(stub, opened, topic)
    await consumer.receive(poll_s=5)  # first pop of the group: offsets start at the end
    started = time.monotonic()
    receiving = asyncio.create_task(consumer.receive(poll_s=15))
    await asyncio.sleep(1.0)
    [msg_id] = await send(stub, topic, range(1))
    receipt = await asyncio.wait_for(receiving, 20)
    assert [m.system_properties.message_id for m in receipt.messages] == [msg_id]
    assert time.monotonic() - started < 6


async def test_fifo_group_pops_in_order_and_blocks_until_acked(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    """G5 in small: a consumer of an orderly group (``updateSubGroup -o true``) is told fifo
    and sees one message group in send order; an un-acked batch blocks the queue until acked."""
    topic = create_topic(env, "FIFO")
    consumer = await consumer_for(stub, opened, topic, create_group(env, orderly=True))
    assert consumer.settings.subscription.fifo
    ids = await send(stub, topic, range(9), message_group="g1", message_type=pb.MessageType.FIFO)
    seen: list[str] = []
    for _ in range(6):
        batch = (await consumer.receive(batch=3, invisible_s=30, poll_s=5)).messages
        if not batch:
            continue
        assert all(m.system_properties.message_group == "g1" for m in batch)
        assert batch[0].system_properties.message_type == pb.MessageType.FIFO
        handles = [handle_fields(m) for m in batch]
        assert {h[3] for h in handles} == {"999"}  # orderly pop
        if not seen:  # an un-acked batch blocks its queue
            blocked = await consumer.receive(batch=3, invisible_s=30, poll_s=5)
            assert blocked.messages == []
        seen.extend(m.system_properties.message_id for m in batch)
        assert (await consumer.ack_messages(batch)).status.code == pb.Code.OK
        if len(seen) == len(ids):
            break
    assert seen == ids


async def test_auto_renew_keeps_a_message_invisible_and_acks_with_the_latest_handle(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    """``auto_renew``: the proxy pops for renewSliceTimeMillis (4 s) and renews before expiry,
    so the message stays away well past 4 s; an ack with the handle the client got succeeds
    (the proxy substitutes the renewed one) and the message never comes back."""
    topic = create_topic(env)
    consumer = await consumer_for(stub, opened, topic)
    [msg_id] = await send(stub, topic, range(1))
    got: list[pb.Message] = []
    for _ in range(5):
        got += (await consumer.receive(auto_renew=True)).messages
        if got:
            break
    [msg] = got
    assert handle_fields(msg)[2] == "4000"
    started = time.monotonic()
    while time.monotonic() - started < 11:
        assert (await consumer.receive(invisible_s=10, poll_s=5)).messages == []
    acked = await consumer.ack((msg_id, msg.system_properties.receipt_handle))
    assert acked.status.code == pb.Code.OK, acked.status.message
    assert acked.entries[0].receipt_handle != msg.system_properties.receipt_handle
    assert (await consumer.receive(invisible_s=10, poll_s=7)).messages == []


async def test_terminated_client_releases_its_renewed_messages(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    """A client that received with ``auto_renew`` and then terminates gives its messages back
    (visible again after 1 s): another client of the group gets them with attempt 2."""
    topic = create_topic(env)
    first = await consumer_for(stub, opened, topic)
    [msg_id] = await send(stub, topic, range(1))
    got: list[pb.Message] = []
    for _ in range(5):
        got += (await first.receive(auto_renew=True)).messages
        if got:
            break
    assert [m.system_properties.message_id for m in got] == [msg_id]
    bye = await stub.NotifyClientTermination(
        spb.NotifyClientTerminationRequest(group=pb.Resource(name=first.group)),
        metadata=first.meta, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert bye.status.code == pb.Code.OK
    second = GrpcConsumer(stub, unique("client@2@0"), first.group, topic)
    await second.open()
    opened.append(second)
    back: list[pb.Message] = []
    started = time.monotonic()
    while not back and time.monotonic() - started < 10:
        back = (await second.receive(invisible_s=30, poll_s=5)).messages
    assert [m.system_properties.message_id for m in back] == [msg_id]
    assert time.monotonic() - started < 8  # not the 4 s slice plus renewals: released at once
    assert back[0].system_properties.delivery_attempt == 2
    assert (await second.ack_messages(back)).status.code == pb.Code.OK


async def _dlq_messages(namesrv: str, group: str) -> list[str]:
    """The message ids in ``%DLQ%<group>``, once its route exists (the broker registers a topic
    created by a send-back at its next registration, within a second here)."""
    consumer = PullConsumer(unique("dlq_reader"), namesrv)
    await consumer.start()
    ids: list[str] = []
    try:
        async with asyncio.timeout(30):
            while not ids:
                try:
                    queues = await consumer.fetch_queues(f"%DLQ%{group}")
                except Exception:  # noqa: BLE001 - no route yet
                    queues = []
                for queue in queues:
                    result = await consumer.pull(queue, 0, max_nums=32, timeout_s=TIMEOUT_S)
                    if result.status == PullStatus.FOUND:
                        ids.extend(m.msg_id for m in result.msgs)
                if not ids:
                    await asyncio.sleep(0.5)
    finally:
        await consumer.shutdown()
    return ids


async def test_forward_to_dead_letter_queue(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    """ForwardMessageToDeadLetterQueue: the message lands in %DLQ%<group> and is never
    delivered again; a handle without a commit-log offset is refused."""
    topic = create_topic(env)
    consumer = await consumer_for(stub, opened, topic)
    [msg_id] = await send(stub, topic, range(1))
    [msg] = await consumer.receive_until(1, invisible_s=10)
    eight = " ".join(handle_fields(msg)[:8])
    bare = await stub.ForwardMessageToDeadLetterQueue(
        spb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name=consumer.group), topic=pb.Resource(name=topic),
            receipt_handle=eight, message_id=msg_id,
        ),
        metadata=consumer.meta, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert bare.status.code == pb.Code.INVALID_RECEIPT_HANDLE
    forwarded = await consumer.forward_to_dlq(msg)
    assert forwarded.status.code == pb.Code.OK, forwarded.status.message
    assert await _dlq_messages(env.namesrv_addr, consumer.group) == [msg_id]
    started = time.monotonic()
    while time.monotonic() - started < 14:
        assert (await consumer.receive(invisible_s=10, poll_s=5)).messages == []


async def test_dead_letter_after_max_attempts(
    env: Env, stub: service_pb2_grpc.MessagingServiceStub, opened: list[GrpcConsumer]
) -> None:
    """The proxy decides: a redelivery whose reconsume count reached the group's max attempts
    (``updateSubGroup -r 0``: retryMaxTimes + 1 = 1) goes to %DLQ%<group> instead of the
    client."""
    topic = create_topic(env)
    consumer = await consumer_for(stub, opened, topic, create_group(env, retry_max_times=0))
    assert consumer.settings.backoff_policy.max_attempts == 1
    [msg_id] = await send(stub, topic, range(1))
    [first] = await consumer.receive_until(1, invisible_s=10)
    assert first.system_properties.delivery_attempt == 1
    started = time.monotonic()
    while time.monotonic() - started < 16:
        assert (await consumer.receive(invisible_s=10, poll_s=5)).messages == []
    assert await _dlq_messages(env.namesrv_addr, consumer.group) == [msg_id]
    env.proxy.wait_output("message forwarded to the DLQ")


def _group_offset(store: Path, topic: str, group: str) -> int:
    """The group's committed offsets of ``topic`` on disk, summed over its queues."""
    path = store / "config" / "consumerOffset.json"
    if not path.exists():
        return 0
    entry = loads(path.read_bytes())["offsetTable"].get(f"{topic}@{group}") or {}
    return sum(int(v) for v in entry.values())


async def test_broker_sigkill_behind_the_proxy_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """1. Own namesrv + broker + mqproxy (routes refreshed every second: the restarted broker
    listens on a new port). 2. Send 10 through the proxy, receive all (invisible 10 s), ack
    indexes 0-4. 3. Once the pop offsets are on disk, SIGKILL the broker and start it again on
    its store. Expected: exactly the un-acked 5-9 come back through the proxy, with
    delivery_attempt 2; their new handles ack; nothing comes back after that."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    store = tmp_path / "kill-store"
    daemons: list[Daemon] = [namesrv]
    try:
        broker, _ = start_broker(tmp_path, ns_addr, store=store, extra=BROKER_EXTRA, tag="k1")
        daemons.append(broker)
        proxy, port = start_proxy(tmp_path, ns_addr, {"topicRouteServiceCacheRefreshSeconds": 1})
        daemons.append(proxy)
        topic = create_topic_at(ns_addr, tmp_path, queues=2)
        async with proxy_channel(port) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            consumer = GrpcConsumer(stub, "killer@1@0@x", unique("cg_kill"), topic)
            await consumer.open()
            try:
                ids = await send(stub, topic, range(10))
                got = await consumer.receive_until(10, invisible_s=10)
                by_id = {m.system_properties.message_id: m for m in got}
                assert sorted(by_id) == ids
                acked = await consumer.ack_messages([by_id[i] for i in ids[:5]])
                assert acked.status.code == pb.Code.OK
                async with asyncio.timeout(10):
                    while _group_offset(store, topic, consumer.group) != 10:
                        await asyncio.sleep(0.05)
                broker.proc.kill()
                broker.stop()
                daemons.remove(broker)
                broker, _ = start_broker(
                    tmp_path, ns_addr, store=store, extra=BROKER_EXTRA, tag="k2"
                )
                daemons.insert(1, broker)
                back: list[pb.Message] = []
                async with asyncio.timeout(60):
                    while len(back) < 5:
                        back += (await consumer.receive(invisible_s=30, poll_s=5)).messages
                assert sorted(m.system_properties.message_id for m in back) == ids[5:]
                assert {m.system_properties.delivery_attempt for m in back} == {2}
                assert (await consumer.ack_messages(back)).status.code == pb.Code.OK
                started = time.monotonic()
                while time.monotonic() - started < 13:
                    late = await consumer.receive(invisible_s=10, poll_s=5)
                    assert late.messages == []
            finally:
                await consumer.close()
    finally:
        codes = [d.stop() for d in reversed(daemons)]
    assert codes == [0] * len(codes), daemons[-1].tail(3000)
