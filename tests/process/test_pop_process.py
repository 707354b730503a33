"""POP consumption against a real ``bin/mqbroker`` process (proxy.md section 3).

One namesrv + broker per module (``reviveInterval=100``, fast offset persistence); each test uses
its own topic and group. The SIGKILL test starts its own broker twice on one store.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketpy.client.simple_consumer import PopMessage, SimpleConsumer, pop_messages
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.fastjson import loads
from rocketpy.remoting.protocol import pop as codec
from rocketpy.remoting.protocol.command import RemotingCommand
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.processes import REPO, Daemon, bin_env, start_broker, start_namesrv

pytestmark = pytest.mark.process

BROKER_EXTRA = (
    "reviveInterval=100\nflushConsumerOffsetInterval=100\nautoCreateTopicEnable=false\n"
    "popFromRetryProbability=20\npopPollingSize=1\n"
)


@dataclass
class Env:
    """The shared processes."""

    tmp: Path
    namesrv: str
    daemon: Daemon
    addr: str


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("pop")
    namesrv, ns_addr = start_namesrv(tmp)
    try:
        daemon, addr = start_broker(tmp, ns_addr, extra=BROKER_EXTRA)
        try:
            yield Env(tmp, ns_addr, daemon, addr)
            assert daemon.proc.poll() is None, daemon.output()
        finally:
            daemon.stop()
    finally:
        namesrv.stop()


@pytest.fixture
async def client() -> AsyncIterator[JavaLikeClient]:
    made = JavaLikeClient()
    try:
        yield made
    finally:
        await made.close()


async def create_topic(
    client: JavaLikeClient, addr: str, topic: str, queues: int = 1, namesrv: str | None = None
) -> None:
    """``topic`` on the broker at ``addr``; with ``namesrv``, also wait (10 s) until that
    NameServer routes it (a SimpleConsumer's first receive looks the route up)."""
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
           "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG"}  # fmt: skip
    resp = await client.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    if namesrv is None:
        return
    async with asyncio.timeout(10):
        while True:
            resp = await client.call(namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            if resp.code == ResponseCode.SUCCESS and addr.encode() in (resp.body or b""):
                return
            await asyncio.sleep(0.05)


async def send(client: JavaLikeClient, addr: str, topic: str, bodies: list[bytes]) -> None:
    for body in bodies:
        resp = await client.send(addr, topic, body, tags="TagA")
        assert resp.code == ResponseCode.SUCCESS, resp.remark


def pop_ext(
    group: str,
    topic: str,
    *,
    queue_id: int = -1,
    max_nums: int = 32,
    invisible_ms: int = 60_000,
    poll_ms: int = 0,
    order: bool = False,
    attempt: str | None = None,
    exp: str = "*",
) -> dict[str, str]:
    ext = {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id),
        "maxMsgNums": str(max_nums), "invisibleTime": str(invisible_ms), "pollTime": str(poll_ms),
        "bornTime": str(int(time.time() * 1000)), "initMode": "0", "expType": "TAG", "exp": exp,
        "order": "true" if order else "false",
    }  # fmt: skip
    if attempt is not None:
        ext["attemptId"] = attempt
    return ext


async def pop(
    client: JavaLikeClient, addr: str, topic: str, **kw: object
) -> tuple[RemotingCommand, list[PopMessage]]:
    ext = pop_ext(str(kw.pop("group")), topic, **kw)  # type: ignore[arg-type]
    poll_s = int(ext["pollTime"]) / 1000
    resp = await client.call(addr, RequestCode.POP_MESSAGE, ext, timeout_s=5 + poll_s)
    if resp.code != ResponseCode.SUCCESS:
        return resp, []
    return resp, pop_messages(resp, topic=topic, broker_name="broker-a", broker_addr=addr)


async def ack(client: JavaLikeClient, addr: str, group: str, msg: PopMessage) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": msg.ack_topic(group),
           "queueId": str(msg.extra_info.queue_id), "extraInfo": msg.receipt_handle,
           "offset": str(msg.extra_info.queue_offset)}  # fmt: skip
    return await client.call(addr, RequestCode.ACK_MESSAGE, ext)


async def test_pop_then_ack_with_the_simple_consumer(env: Env, client: JavaLikeClient) -> None:
    """1. Create a 2-queue topic, send 5 messages.
    2. A SimpleConsumer receives them (header infos parsed into handles) and acks each.
    Expected: all 5 bodies once, each handle of type 0 naming broker-a; the next receive is
    empty, also after the invisible time would have passed."""
    await create_topic(client, env.addr, "PopAck", queues=2, namesrv=env.namesrv)
    bodies = [f"m{i}".encode() for i in range(5)]
    await send(client, env.addr, "PopAck", bodies)
    consumer = SimpleConsumer(
        "GPopAck", env.namesrv, {"PopAck": "*"}, await_duration_s=1.0, init_mode=0
    )
    await consumer.start()
    try:
        got: list[PopMessage] = []
        async with asyncio.timeout(20):
            while len(got) < len(bodies):
                got += await consumer.receive(32, 2.0)
        assert sorted(m.message.body for m in got) == bodies
        for m in got:
            assert m.extra_info.topic_type == codec.NORMAL_TOPIC
            assert m.extra_info.broker_name == "broker-a"
            assert 0 <= m.extra_info.revive_qid < 8
            await consumer.ack(m)
        await asyncio.sleep(2.5)
        assert await consumer.receive(32, 2.0) == []
    finally:
        await consumer.shutdown()


async def test_invisible_time_expiry_redelivers_from_retry_topic(
    env: Env, client: JavaLikeClient
) -> None:
    """1. Pop one message with invisibleTime 1 s and do not ack it.
    2. Long-poll again (pollTime 5 s).
    Expected: the message comes back from %RETRY%G_T with reconsumeTimes 1 and a type-1
    handle; acking that handle ends it (nothing more after another expiry)."""
    await create_topic(client, env.addr, "PopExpire")
    await send(client, env.addr, "PopExpire", [b"again"])
    _, first = await pop(
        client, env.addr, "PopExpire", group="GExp", invisible_ms=1000, poll_ms=3000
    )
    assert [m.message.body for m in first] == [b"again"]
    assert first[0].message.reconsume_times == 0
    started = time.monotonic()
    retried: list[PopMessage] = []
    async with asyncio.timeout(15):
        while not retried:
            _, retried = await pop(
                client, env.addr, "PopExpire", group="GExp", invisible_ms=1000, poll_ms=5000
            )
    assert time.monotonic() - started >= 0.5
    msg = retried[0]
    assert msg.message.body == b"again"
    assert msg.message.topic == "PopExpire"  # re-encoded under the subscribed topic
    assert msg.message.properties["POP_CK"] == msg.receipt_handle
    assert msg.ack_topic("GExp") == "%RETRY%GExp_PopExpire"
    assert msg.message.reconsume_times == 1
    assert msg.extra_info.topic_type == codec.RETRY_TOPIC
    assert msg.message.properties["RETRY_TOPIC"] == "PopExpire"
    assert (await ack(client, env.addr, "GExp", msg)).code == ResponseCode.SUCCESS
    await asyncio.sleep(2.0)
    resp, again = await pop(client, env.addr, "PopExpire", group="GExp", poll_ms=1000)
    assert again == [], [m.message.body for m in again]
    assert resp.code == ResponseCode.POLLING_TIMEOUT


async def test_change_invisible_time_postpones_redelivery(env: Env, client: JavaLikeClient) -> None:
    """1. Pop with invisibleTime 1 s; change it to 30 s.
    2. Wait 2.5 s and pop again.
    Expected: nothing comes back; the new handle (ck start = its own offset) acks SUCCESS."""
    await create_topic(client, env.addr, "PopChange")
    await send(client, env.addr, "PopChange", [b"later"])
    _, got = await pop(client, env.addr, "PopChange", group="GChg", invisible_ms=1000, poll_ms=3000)
    msg = got[0]
    ext = {"consumerGroup": "GChg", "topic": "PopChange", "queueId": "0",
           "extraInfo": msg.receipt_handle, "offset": str(msg.extra_info.queue_offset),
           "invisibleTime": "30000"}  # fmt: skip
    resp = await client.call(env.addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ext)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.ext_fields is not None
    assert resp.ext_fields["invisibleTime"] == "30000"
    new_pop_time = int(resp.ext_fields["popTime"])
    assert new_pop_time >= msg.extra_info.pop_time
    await asyncio.sleep(2.5)
    _, again = await pop(client, env.addr, "PopChange", group="GChg")
    assert again == []
    new = codec.ExtraInfo(
        ck_queue_offset=msg.extra_info.queue_offset,
        pop_time=new_pop_time,
        invisible_time=30_000,
        revive_qid=msg.extra_info.revive_qid,
        topic_type="0",
        broker_name="broker-a",
        queue_id=0,
        queue_offset=msg.extra_info.queue_offset,
    )
    ext_ack = {"consumerGroup": "GChg", "topic": "PopChange", "queueId": "0",
               "extraInfo": new.encode(), "offset": str(msg.extra_info.queue_offset)}  # fmt: skip
    r = await client.call(env.addr, RequestCode.ACK_MESSAGE, ext_ack)
    assert r.code == ResponseCode.SUCCESS


async def test_long_polling_is_woken_by_a_send(env: Env, client: JavaLikeClient) -> None:
    """1. Pop an empty topic with pollTime 8 s.
    2. Send one message 0.3 s later.
    Expected: the parked pop answers with it well before its poll time."""
    await create_topic(client, env.addr, "PopPoll")
    started = time.monotonic()
    task = asyncio.create_task(pop(client, env.addr, "PopPoll", group="GPoll", poll_ms=8000))
    await asyncio.sleep(0.3)
    await send(client, env.addr, "PopPoll", [b"wake"])
    resp, got = await asyncio.wait_for(task, 10)
    assert resp.code == ResponseCode.SUCCESS
    assert [m.message.body for m in got] == [b"wake"]
    assert time.monotonic() - started < 4


async def test_orderly_pop_blocks_repops_and_commits_in_order(
    env: Env, client: JavaLikeClient
) -> None:
    """1. Send 3 messages to a 1-queue topic; pop 2 orderly (attempt a1, invisible 1.5 s).
    2. Pop with attempt a2, then again with a1.
    3. Ack both; pop (a3); let that batch expire; pop (a4).
    Expected: 2. a2 gets nothing (queue blocked), a1 the same two messages; 3. a3 gets the
    third message with count 0, a4 the same with count 1; revive queue 999 on every handle."""
    await create_topic(client, env.addr, "PopOrder")
    await send(client, env.addr, "PopOrder", [b"o0", b"o1", b"o2"])
    kw = {"group": "GOrd", "order": True, "invisible_ms": 1500}
    resp, first = await pop(
        client, env.addr, "PopOrder", max_nums=2, attempt="a1", poll_ms=3000, **kw
    )
    assert [m.message.body for m in first] == [b"o0", b"o1"]
    assert resp.ext_fields is not None
    assert resp.ext_fields["reviveQid"] == "999"
    assert resp.ext_fields["orderCountInfo"] == "0 0 0"
    _, blocked = await pop(client, env.addr, "PopOrder", max_nums=2, attempt="a2", **kw)
    assert blocked == []
    _, same = await pop(client, env.addr, "PopOrder", max_nums=2, attempt="a1", **kw)
    assert [m.message.body for m in same] == [b"o0", b"o1"]
    for m in same:
        assert (await ack(client, env.addr, "GOrd", m)).code == ResponseCode.SUCCESS
    _, third = await pop(client, env.addr, "PopOrder", max_nums=2, attempt="a3", **kw)
    assert [m.message.body for m in third] == [b"o2"]
    assert third[0].message.reconsume_times == 0
    await asyncio.sleep(1.7)
    resp, repop = await pop(client, env.addr, "PopOrder", max_nums=2, attempt="a4", **kw)
    assert [m.message.body for m in repop] == [b"o2"]
    assert resp.ext_fields is not None
    assert resp.ext_fields["orderCountInfo"] == "0 qo0%2 1;0 0 1"
    assert repop[0].message.reconsume_times == 1


async def test_bad_pop_and_ack_input_codes(env: Env, client: JavaLikeClient) -> None:
    """Expected: maxMsgNums 33 INVALID_PARAMETER; unknown topic TOPIC_NOT_EXIST; queueId 5 of a
    1-queue topic SYSTEM_ERROR (as 5.3's PopMessageProcessor); ack of an unknown topic
    TOPIC_NOT_EXIST, of a bad queue MESSAGE_ILLEGAL, of an offset past the queue NO_MESSAGE;
    change-invisible at max offset NO_MESSAGE; a stale bornTime POLLING_TIMEOUT."""
    await create_topic(client, env.addr, "PopBad")
    call = client.call
    r = await call(env.addr, RequestCode.POP_MESSAGE, pop_ext("GB", "PopBad", max_nums=33))
    assert r.code == ResponseCode.INVALID_PARAMETER
    r = await call(env.addr, RequestCode.POP_MESSAGE, pop_ext("GB", "NoSuchTopic"))
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    r = await call(env.addr, RequestCode.POP_MESSAGE, pop_ext("GB", "PopBad", queue_id=5))
    assert r.code == ResponseCode.SYSTEM_ERROR
    stale = pop_ext("GB", "PopBad") | {"bornTime": str(int(time.time() * 1000) - 60_000)}
    r = await call(env.addr, RequestCode.POP_MESSAGE, stale)
    assert r.code == ResponseCode.POLLING_TIMEOUT
    handle = "0 1764230400123 30000 3 0 broker-a 0 0"
    base = {"consumerGroup": "GB", "extraInfo": handle, "offset": "0"}
    r = await call(env.addr, RequestCode.ACK_MESSAGE, base | {"topic": "Nope", "queueId": "0"})
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    r = await call(env.addr, RequestCode.ACK_MESSAGE, base | {"topic": "PopBad", "queueId": "7"})
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    far = base | {"topic": "PopBad", "queueId": "0", "offset": "99"}
    assert (await call(env.addr, RequestCode.ACK_MESSAGE, far)).code == ResponseCode.NO_MESSAGE
    at_max = base | {"topic": "PopBad", "queueId": "0", "invisibleTime": "1000"}
    r = await call(env.addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, at_max)
    assert r.code == ResponseCode.NO_MESSAGE


def _group_offset(store: Path, topic: str, group: str) -> int | None:
    path = store / "config" / "consumerOffset.json"
    if not path.exists():
        return None
    table = loads(path.read_bytes())["offsetTable"]
    entry = table.get(f"{topic}@{group}")
    return None if entry is None else int(next(iter(entry.values())))


async def test_sigkill_with_unacked_pops_revives_after_restart(
    tmp_path: Path, client: JavaLikeClient
) -> None:
    """1. Own broker; send 3 messages; pop them (invisible 3 s); ack the first.
    2. Wait until the pop offset is persisted, SIGKILL the broker, restart it on the store.
    3. Pop (long polling) until two redeliveries arrived; ack them; wait past another expiry.
    4. Stop the broker (SIGTERM) and start it again.
    Expected: exactly the two un-acked messages come back (reconsumeTimes 1), the acked one
    never; after their acks nothing comes back, also after the second restart (the revive
    progress was persisted: neither lost nor repeated)."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    store = tmp_path / "kill-store"
    daemon, addr = start_broker(tmp_path, ns_addr, store=store, extra=BROKER_EXTRA, tag="k1")
    try:
        await create_topic(client, addr, "PopKill")
        await send(client, addr, "PopKill", [b"k0", b"k1", b"k2"])
        _, got = await pop(client, addr, "PopKill", group="GKill", invisible_ms=3000, poll_ms=3000)
        assert [m.message.body for m in got] == [b"k0", b"k1", b"k2"]
        assert (await ack(client, addr, "GKill", got[0])).code == ResponseCode.SUCCESS
        async with asyncio.timeout(10):
            while _group_offset(store, "PopKill", "GKill") != 3:
                await asyncio.sleep(0.05)
        daemon.proc.kill()
        daemon.stop()
        daemon, addr = start_broker(tmp_path, ns_addr, store=store, extra=BROKER_EXTRA, tag="k2")
        back: list[PopMessage] = []
        async with asyncio.timeout(20):
            while len(back) < 2:
                _, more = await pop(client, addr, "PopKill", group="GKill", poll_ms=3000)
                back += more
        assert sorted(m.message.body for m in back) == [b"k1", b"k2"]
        assert {m.message.reconsume_times for m in back} == {1}
        for m in back:
            assert (await ack(client, addr, "GKill", m)).code == ResponseCode.SUCCESS
        await asyncio.sleep(4)
        _, late = await pop(client, addr, "PopKill", group="GKill", poll_ms=500)
        assert late == [], [m.message.body for m in late]
        daemon.stop()
        revive = loads((store / "config" / "consumerOffset.json").read_bytes())["offsetTable"]
        progress = revive["rmq_sys_REVIVE_LOG_DefaultCluster@CID_RMQ_SYS_REVIVE_GROUP"]
        assert sum(int(v) for v in progress.values()) > 0
        daemon, addr = start_broker(tmp_path, ns_addr, store=store, extra=BROKER_EXTRA, tag="k3")
        await asyncio.sleep(2)
        _, after = await pop(client, addr, "PopKill", group="GKill", poll_ms=1000)
        assert after == [], [m.message.body for m in after]
    finally:
        daemon.stop()
        namesrv.stop()


def test_benchmark_popconsumer_reports_rates(env: Env) -> None:
    """1. Send 40 messages. 2. ``benchmark popconsumer`` for 3 s with 2 receive loops.
    Expected: interval lines with Pop TPS and p50/p99, a summary that popped all 40, no failure;
    afterwards nothing is left to pop (every message was acked)."""

    async def prepare() -> None:
        client = JavaLikeClient()
        try:
            await create_topic(client, env.addr, "PopBench", queues=2)
            await send(client, env.addr, "PopBench", [b"b%d" % i for i in range(40)])
        finally:
            await client.close()

    asyncio.run(prepare())
    out = subprocess.run(
        [sys.executable, "-m", "rocketpy.tools.benchmark", "popconsumer", "-n", env.namesrv,
         "-t", "PopBench", "-g", "GBench", "-w", "2", "-d", "3", "--report-interval", "1"],
        capture_output=True, text=True, timeout=60, env=bin_env(env.tmp / "bench-logs"),
        cwd=REPO, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert re.search(r"Current Time: .* \| Pop TPS: [\d,]+ \| p50\(ms\): [\d.]+ \| p99", out.stdout)
    done = re.search(r"\[Complete\] popped ([\d,]+) messages", out.stdout)
    assert done is not None, out.stdout
    assert int(done.group(1).replace(",", "")) == 40, out.stdout
    assert "Pop Failed: 0" in out.stdout


async def test_batch_ack_acks_by_bit_set_and_the_rest_is_revived(
    env: Env, client: JavaLikeClient
) -> None:
    """1. Pop 3 messages (invisible 1 s). 2. BATCH_ACK_MESSAGE with bits {0, 2} from the ck
    start. Expected: only the middle message comes back, from the retry topic."""
    await create_topic(client, env.addr, "PopBatch")
    await send(client, env.addr, "PopBatch", [b"x0", b"x1", b"x2"])
    _, got = await pop(client, env.addr, "PopBatch", group="GBat", invisible_ms=1000, poll_ms=3000)
    assert [m.message.body for m in got] == [b"x0", b"x1", b"x2"]
    extra = got[0].extra_info
    entry = codec.BatchAck(
        consumer_group="GBat", topic="PopBatch", retry="0", start_offset=extra.ck_queue_offset,
        queue_id=0, revive_queue_id=extra.revive_qid, pop_time=extra.pop_time,
        invisible_time=extra.invisible_time, bit_set=frozenset({0, 2}),
    )  # fmt: skip
    body = codec.encode_batch_ack_body("broker-a", [entry])
    r = await client.call(env.addr, RequestCode.BATCH_ACK_MESSAGE, {}, body)
    assert r.code == ResponseCode.SUCCESS, r.remark
    back: list[PopMessage] = []
    async with asyncio.timeout(15):
        while not back:
            _, back = await pop(client, env.addr, "PopBatch", group="GBat", poll_ms=3000)
    assert [m.message.body for m in back] == [b"x1"]
    assert (await ack(client, env.addr, "GBat", back[0])).code == ResponseCode.SUCCESS
    await asyncio.sleep(1.5)
    _, more = await pop(client, env.addr, "PopBatch", group="GBat", poll_ms=500)
    assert more == []


async def test_peek_notification_and_polling_info(env: Env, client: JavaLikeClient) -> None:
    """1. PEEK an empty topic, NOTIFICATION without waiting. 2. Park a POP (pollTime 4 s) and a
    second one on the same key (popPollingSize=1). 3. POLLING_INFO. 4. Send; PEEK; NOTIFICATION.
    Expected: 1. PULL_NOT_FOUND, hasMsg false; 2. the second gets POLLING_FULL; 3. pollingNum 1;
    4. the parked pop gets the message; peek then shows nothing left to pop (the pop committed
    its offset) while a notification for a new group says hasMsg true."""
    await create_topic(client, env.addr, "PopPeek")
    peek = {"consumerGroup": "GPeek", "topic": "PopPeek", "queueId": "-1", "maxMsgNums": "8"}
    r = await client.call(env.addr, RequestCode.PEEK_MESSAGE, peek)
    assert r.code == ResponseCode.PULL_NOT_FOUND
    note = {"consumerGroup": "GPeek", "topic": "PopPeek", "queueId": "-1", "pollTime": "0",
            "bornTime": str(int(time.time() * 1000))}  # fmt: skip
    r = await client.call(env.addr, RequestCode.NOTIFICATION, note)
    assert (r.code, (r.ext_fields or {}).get("hasMsg")) == (ResponseCode.SUCCESS, "false")
    parked = asyncio.create_task(pop(client, env.addr, "PopPeek", group="GPeek", poll_ms=4000))
    info = {"consumerGroup": "GPeek", "topic": "PopPeek", "queueId": "-1"}
    async with asyncio.timeout(5):
        while True:
            r = await client.call(env.addr, RequestCode.POLLING_INFO, info)
            assert r.code == ResponseCode.SUCCESS
            if (r.ext_fields or {}).get("pollingNum") == "1":
                break
            await asyncio.sleep(0.05)
    full, _ = await pop(client, env.addr, "PopPeek", group="GPeek", poll_ms=4000)
    assert full.code == ResponseCode.POLLING_FULL
    await send(client, env.addr, "PopPeek", [b"seen"])
    resp, got = await asyncio.wait_for(parked, 10)
    assert [m.message.body for m in got] == [b"seen"], resp
    r = await client.call(env.addr, RequestCode.PEEK_MESSAGE, peek)
    assert r.code == ResponseCode.PULL_NOT_FOUND
    other = note | {"consumerGroup": "GPeek2"}
    r = await client.call(env.addr, RequestCode.NOTIFICATION, other)
    assert (r.ext_fields or {}).get("hasMsg") == "true"
    r = await client.call(env.addr, RequestCode.PEEK_MESSAGE, peek | {"consumerGroup": "GPeek2"})
    assert r.code == ResponseCode.SUCCESS
    assert r.body is not None


async def test_simple_consumer_follows_the_route_to_every_master(
    tmp_path: Path, client: JavaLikeClient
) -> None:
    """1. Two brokers (broker-a, broker-b) on one NameServer, the topic on both, 3 messages each.
    2. A SimpleConsumer receives until it has 6.
    Expected: messages from both brokers, each handle naming its broker; acks go to the broker
    that popped (nothing comes back after the invisible time)."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    daemons: list[Daemon] = []
    try:
        for name in ("broker-a", "broker-b"):
            daemon, addr = start_broker(tmp_path, ns_addr, name=name, extra=BROKER_EXTRA)
            daemons.append(daemon)
            await create_topic(client, addr, "PopTwo", queues=2, namesrv=ns_addr)
            await send(client, addr, "PopTwo", [f"{name}-{i}".encode() for i in range(3)])
        consumer = SimpleConsumer(
            "GTwo", ns_addr, {"PopTwo": "*"}, await_duration_s=1.0, init_mode=0
        )
        await consumer.start()
        try:
            got: list[PopMessage] = []
            async with asyncio.timeout(30):
                while len(got) < 6:
                    got += await consumer.receive(32, 2.0)
            assert {m.extra_info.broker_name for m in got} == {"broker-a", "broker-b"}
            for m in got:
                assert m.message.body.decode().startswith(m.extra_info.broker_name)
                await consumer.ack(m)
            await asyncio.sleep(2.5)
            assert await consumer.receive(32, 2.0) == []
            assert await consumer.receive(32, 2.0) == []
        finally:
            await consumer.shutdown()
    finally:
        for daemon in daemons:
            daemon.stop()
        namesrv.stop()


async def test_orderly_state_survives_a_restart(tmp_path: Path, client: JavaLikeClient) -> None:
    """1. Own broker; send 2 messages; pop 1 orderly (attempt a1, invisible 20 s).
    2. Stop the broker (SIGTERM), start it again on the store.
    3. Pop with attempt a2; ack the first handle; pop with attempt a3.
    Expected: config/consumerOrderInfo.json holds the batch; after the restart the queue is still
    blocked for a2; the old handle's ack commits, and a3 gets the second message."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    store = tmp_path / "order-store"
    daemon, addr = start_broker(tmp_path, ns_addr, store=store, extra=BROKER_EXTRA, tag="o1")
    try:
        await create_topic(client, addr, "PopOrdRestart")
        await send(client, addr, "PopOrdRestart", [b"r0", b"r1"])
        kw = {"group": "GOR", "order": True, "invisible_ms": 20_000, "max_nums": 1}
        _, first = await pop(client, addr, "PopOrdRestart", attempt="a1", poll_ms=3000, **kw)
        assert [m.message.body for m in first] == [b"r0"]
        daemon.stop()
        saved = loads((store / "config" / "consumerOrderInfo.json").read_bytes())
        info = saved["table"]["PopOrdRestart@GOR"]
        assert next(iter(info.values()))["a"] == "a1"
        daemon, addr = start_broker(tmp_path, ns_addr, store=store, extra=BROKER_EXTRA, tag="o2")
        _, blocked = await pop(client, addr, "PopOrdRestart", attempt="a2", **kw)
        assert blocked == []
        assert (await ack(client, addr, "GOR", first[0])).code == ResponseCode.SUCCESS
        _, second = await pop(client, addr, "PopOrdRestart", attempt="a3", poll_ms=3000, **kw)
        assert [m.message.body for m in second] == [b"r1"]
    finally:
        daemon.stop()
        namesrv.stop()


async def test_pop_filters_by_tag_and_skips_the_rest(env: Env, client: JavaLikeClient) -> None:
    """1. Send TagA, TagB, TagA. 2. Pop with exp "TagA" (invisible 1 s), ack nothing.
    3. Pop again with "TagA || TagB" until the redeliveries arrived.
    Expected: 2. the two TagA messages (ck offsets 0 and 2); 3. only those two come back from
    the retry topic: the TagB message was skipped by the filter, not popped, so not revived."""
    await create_topic(client, env.addr, "PopTag")
    for body, tag in ((b"a1", "TagA"), (b"b1", "TagB"), (b"a2", "TagA")):
        assert (await client.send(env.addr, "PopTag", body, tags=tag)).code == 0
    _, got = await pop(
        client, env.addr, "PopTag", group="GTag", invisible_ms=1000, poll_ms=3000, exp="TagA"
    )
    assert [m.message.body for m in got] == [b"a1", b"a2"]
    assert [m.extra_info.queue_offset for m in got] == [0, 2]
    back: list[PopMessage] = []
    async with asyncio.timeout(15):
        while len(back) < 2:
            _, more = await pop(
                client, env.addr, "PopTag", group="GTag", poll_ms=3000, exp="TagA || TagB"
            )
            back += more
    assert sorted(m.message.body for m in back) == [b"a1", b"a2"]
    assert {m.extra_info.topic_type for m in back} == {codec.RETRY_TOPIC}


async def test_simple_consumer_dead_letters_past_max_reconsume_times(
    env: Env, client: JavaLikeClient
) -> None:
    """1. A SimpleConsumer with max_reconsume_times=0 receives one message (invisible 1 s) and
    does not ack it.
    2. It receives again after the revive.
    Expected: the redelivery (reconsumeTimes 1) is not returned: it is in %DLQ%<group> with its
    body, and it is acked (nothing comes back after another invisible time)."""
    await create_topic(client, env.addr, "PopDlq", namesrv=env.namesrv)
    await send(client, env.addr, "PopDlq", [b"poison"])
    consumer = SimpleConsumer(
        "GPopDlq", env.namesrv, {"PopDlq": "*"}, await_duration_s=1.0, init_mode=0,
        max_reconsume_times=0,
    )  # fmt: skip
    await consumer.start()
    try:
        first: list[PopMessage] = []
        async with asyncio.timeout(10):
            while not first:
                first = await consumer.receive(32, 1.0)
        assert [m.message.body for m in first] == [b"poison"]
        dlq: list[bytes] = []
        async with asyncio.timeout(20):
            while not dlq:
                assert await consumer.receive(32, 1.0) == []
                resp = await client.pull(
                    env.addr, "GPopDlqReader", "%DLQ%GPopDlq", 0, queue_id=0, expression="*"
                )
                if resp.code == ResponseCode.SUCCESS and resp.body:
                    dlq = [m.body for m in decode_records(resp.body)]
        assert dlq == [b"poison"]
        await asyncio.sleep(2.5)
        assert await consumer.receive(32, 1.0) == []
    finally:
        await consumer.shutdown()
