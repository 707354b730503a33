"""Slave acting master as real processes (seed 003; acceptance S-01, S-02, S-03)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from rocketpy.client.admin import TopicRoute, parse_route
from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from tests.helpers.broker_client import JavaLikeClient, decode_records, subscription
from tests.helpers.processes import Daemon, start_broker, start_namesrv

pytestmark = pytest.mark.process

NAMESRV = (
    "supportActingMaster=true\nnotifyMinBrokerIdChanged=true\nscanNotActiveBrokerInterval=200\n"
)
COMMON = (
    "haListenPort=0\nhaSendHeartbeatInterval=200\nhaHousekeepingInterval=3000\n"
    "haReconnectInterval=100\nmessageDelayLevel=1s 2s 3s\nflushConsumerOffsetInterval=200\n"
    "flushDelayOffsetInterval=200\nscheduleScanInterval=50\n"
)
ACTING = (
    COMMON + "enableSlaveActingMaster=true\nenableRemoteEscape=true\ntotalReplicas=2\n"
    "brokerNotActiveTimeoutMillis=3000\nbrokerHeartbeatInterval=200\n"
    "syncBrokerMemberGroupPeriod=200\n"
)
MASTER_A = ACTING + "brokerId=0\nbrokerRole=ASYNC_MASTER\n"
SLAVE_A = ACTING + "brokerId=1\nbrokerRole=SLAVE\n"
MASTER_B = COMMON + "brokerId=0\nbrokerRole=ASYNC_MASTER\n"
TOPIC = "ActingT"
GROUP = "acting-g"
DEADLINE_S = 15


class Cluster:
    """The processes of one run and the client that drives them."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.daemons: dict[str, Daemon] = {}
        self.ns = ""
        self.client = JavaLikeClient()

    async def route(self, topic: str) -> TopicRoute | None:
        resp = await self.client.call(self.ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return parse_route(resp.body or b"{}") if resp.code == ResponseCode.SUCCESS else None

    async def wait_route(self, want: dict[int, str], perm: int) -> None:
        """Until broker-a in TOPIC's route has exactly ``want`` and queue perm ``perm``."""

        async def matches() -> bool:
            route = await self.route(TOPIC)
            if route is None:
                return False
            brokers = [b.broker_addrs for b in route.brokers if b.broker_name == "broker-a"]
            perms = [q.perm for q in route.queues if q.broker_name == "broker-a"]
            return brokers == [want] and perms == [perm]

        async with asyncio.timeout(DEADLINE_S):
            while not await matches():
                await asyncio.sleep(0.05)

    async def member_ids(self) -> set[int]:
        resp = await self.client.call(
            self.ns,
            RequestCode.GET_BROKER_MEMBER_GROUP,
            {"clusterName": "DefaultCluster", "brokerName": "broker-a"},
        )
        group = fastjson.loads(resp.body or b"{}").get("brokerMemberGroup") or {}
        return {int(k) for k in group.get("brokerAddrs") or {}}

    async def query_offset(self, addr: str, queue_id: int) -> int:
        ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id)}
        resp = await self.client.call(addr, RequestCode.QUERY_CONSUMER_OFFSET, ext)
        return int(resp.ext("offset") or -1) if resp.code == ResponseCode.SUCCESS else -1

    async def commit_offset(self, addr: str, queue_id: int, offset: int) -> None:
        ext = {
            "consumerGroup": GROUP,
            "topic": TOPIC,
            "queueId": str(queue_id),
            "commitOffset": str(offset),
        }
        resp = await self.client.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
        assert resp.code == ResponseCode.SUCCESS, resp.remark

    async def find_on(self, addr: str, topic: str, body: bytes, queues: int) -> None:
        """Until some queue of ``topic`` on ``addr`` holds a message with ``body``."""

        async def found() -> bool:
            for q in range(queues):
                resp = await self.client.pull(addr, GROUP, topic, 0, queue_id=q)
                if resp.code != ResponseCode.SUCCESS or not resp.body:
                    continue
                if any(m.body == body for m in decode_records(resp.body)):
                    return True
            return False

        async with asyncio.timeout(DEADLINE_S):
            while not await found():
                await asyncio.sleep(0.1)


async def _max_offset(c: Cluster, addr: str, topic: str, queue_id: int) -> int:
    ext = {"topic": topic, "queueId": str(queue_id)}
    resp = await c.client.call(addr, RequestCode.GET_MAX_OFFSET, ext)
    return int(resp.ext("offset") or -1)


async def _setup(c: Cluster) -> tuple[str, str, str]:
    """broker-b, then broker-a's master and slave; returns their addresses once the set is
    online with the slave following the master."""
    c.daemons["b"], b = start_broker(c.tmp, c.ns, name="broker-b", extra=MASTER_B, tag="b")
    c.daemons["m"], master = start_broker(c.tmp, c.ns, extra=MASTER_A, tag="master")
    await wait_until_async(c.member_ids, {0})
    c.daemons["s"], slave = start_broker(c.tmp, c.ns, extra=SLAVE_A, tag="slave")
    await wait_until_async(c.member_ids, {0, 1})
    for addr in (b, master, slave):
        beat = await c.client.heartbeat(addr, GROUP, (subscription(TOPIC),))
        assert beat.code == ResponseCode.SUCCESS
        # on the slave too: copying topics from the master is not this feature's job
        ext = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "1",
               "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"}  # fmt: skip
        resp = await c.client.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    return b, master, slave


async def wait_until_async(probe: Callable[[], Awaitable[object]], want: object) -> None:
    """Poll an async ``probe()`` until it returns ``want``."""
    async with asyncio.timeout(DEADLINE_S):
        while await probe() != want:
            await asyncio.sleep(0.05)


async def _scenario(c: Cluster) -> None:
    b, master, slave = await _setup(c)
    # 1. messages on broker-a (10 plain + 1 delayed by level 3 = 3 s), the topic on broker-b too
    for i in range(10):
        resp = await c.client.send(master, TOPIC, b"m-%d" % i)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert (await c.client.send(b, TOPIC, b"on-b")).code == ResponseCode.SUCCESS
    await c.wait_route({0: master, 1: slave}, 6)
    # 2. the consumer has consumed five messages from the master
    await c.commit_offset(master, 0, 5)
    delayed = await c.client.send(master, TOPIC, b"delayed", props={"DELAY": "3"})
    assert delayed.code == ResponseCode.SUCCESS
    # the slave holds all of it (10 messages in the topic, the delayed one in level 3's queue)
    for topic, queue, want in ((TOPIC, 0, 10), ("SCHEDULE_TOPIC_XXXX", 2, 1)):
        await wait_until_async(lambda t=topic, q=queue: _max_offset(c, slave, t, q), want)
    # 3. SIGKILL the master: the slave is presented as brokerId 0, read-only
    killed = c.daemons.pop("m")
    killed.proc.kill()
    killed.stop()
    await c.wait_route({0: slave}, 4)
    # 4. consumption continues on the acting slave from the client's offset
    resp = await c.client.pull(slave, GROUP, TOPIC, 5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    msgs = decode_records(resp.body or b"")
    assert [m.body for m in msgs] == [b"m-%d" % i for i in range(5, 10)]
    await c.commit_offset(slave, 0, 10)
    # 5. a send-back while acting is escaped to broker-b (retry topic, delayed by 1 s)
    ext = {
        "offset": str(msgs[0].commit_log_offset),
        "group": GROUP,
        "delayLevel": "1",
        "originTopic": TOPIC,
        "maxReconsumeTimes": "16",
    }
    back = await c.client.call(slave, RequestCode.CONSUMER_SEND_MSG_BACK, ext)
    assert back.code == ResponseCode.SUCCESS, back.remark
    await c.find_on(b, f"%RETRY%{GROUP}", b"m-5", 1)
    # 6. the due delayed message is escaped to broker-b's queues of the topic
    await c.find_on(b, TOPIC, b"delayed", 1)
    # 7. the master returns: pre-online pulls the slave's offsets, then it takes over
    c.daemons["m"], master2 = start_broker(
        c.tmp, c.ns, extra=MASTER_A, tag="master", store=c.tmp / "master" / "store"
    )
    await c.wait_route({0: master2, 1: slave}, 6)
    assert await c.query_offset(master2, 0) == 10


def test_s01_s03_slave_acting_master_escape_and_pre_online(tmp_path: Path) -> None:
    """1. Start a NameServer (supportActingMaster, notifyMinBrokerIdChanged), broker-b, and
    broker-a's master and slave with enableSlaveActingMaster and enableRemoteEscape.
    2. Send 10 messages and one delay-level-3 message to broker-a; commit offset 5 on the master.
    3. SIGKILL broker-a's master. 4. Pull from the slave from offset 5, commit 10 there.
    5. CONSUMER_SEND_MSG_BACK one message to the slave. 6. Wait for the delayed message.
    7. Restart the master on its store.
    Expected: the route shows the slave as brokerId 0 with perm 4; it serves the pull; the
    send-back lands in broker-b's %RETRY% topic and the due delayed message in broker-b's topic
    (escaped, never written on the slave); the restarted master registers only after pre-online
    and then answers the committed offset 10 (offsets never go backwards)."""
    namesrv, ns = start_namesrv(tmp_path, NAMESRV)
    cluster = Cluster(tmp_path)
    cluster.ns = ns

    async def run() -> None:
        try:
            await _scenario(cluster)
        finally:
            await cluster.client.close()

    try:
        asyncio.run(run())
    finally:
        for d in cluster.daemons.values():
            d.stop()
        assert namesrv.stop() == 0, namesrv.output()
