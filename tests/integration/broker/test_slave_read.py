"""Read from slave: ``suggestWhichBrokerId`` on the brokers and the PullConsumer following it
(client-flows.md section 4.3, issue 8)."""

from __future__ import annotations

from pathlib import Path

from rocketpy.broker.service import BrokerService
from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.client.pull_api import PullStatus
from rocketpy.client.pull_consumer import PullConsumer
from rocketpy.common.aio import wait_until
from rocketpy.common.codes import ResponseCode
from rocketpy.namesrv.service import NamesrvService
from tests.helpers.broker_client import JavaLikeClient
from tests.integration.broker.conftest import BrokerFactory, dispatched

HA = {"haSendHeartbeatInterval": 200, "haHousekeepingInterval": 3000, "haReconnectInterval": 100}


async def _pair(
    broker_factory: BrokerFactory, namesrv: NamesrvService, tmp: Path
) -> tuple[BrokerService, BrokerService]:
    # ratio 0 on the master: every FOUND read counts as "far behind" and suggests the slave
    master = await broker_factory(store_root=tmp / "m", ha=HA, brokerId=0, slaveReadEnable=True,
                                  accessMessageInMemoryMaxRatio=0)  # fmt: skip
    slave = await broker_factory(store_root=tmp / "s", ha=HA, brokerId=1, brokerRole="SLAVE",
                                 slaveReadEnable=True, slaveSynchronizeIntervalMs=100)  # fmt: skip
    admin = AdminClient(namesrv.address)
    try:
        await admin.create_topic(master.address, TopicSpec(topic="RT", read_queue_nums=1,
                                                           write_queue_nums=1))  # fmt: skip
    finally:
        await admin.close()
    return master, slave


async def test_slave_read_pull_consumer_follows_suggested_broker(
    broker_factory: BrokerFactory, namesrv: NamesrvService, tmp_path: Path
) -> None:
    """1. Master (slaveReadEnable, accessMessageInMemoryMaxRatio=0) and a replicating SLAVE
    (slaveReadEnable, default ratio 40); topic RT with one queue; 6 messages sent and on both.
    2. PullConsumer pulls 2 from offset 0, 2 from offset 2, the rest from 4, then twice from 6.
    Expected: pull 1 is served by the master, which suggests brokerId 1; pull 2 by the slave,
    which is close to its CommitLog end (default ratio) and suggests the master (brokerId 0);
    pull 3 by the master again (suggests 1); pull 4 (nothing left) by the slave: a slave turns
    "not found" into PULL_RETRY_IMMEDIATELY suggesting the master; pull 5 reaches the master,
    which answers PULL_NOT_FOUND."""
    master, slave = await _pair(broker_factory, namesrv, tmp_path)
    client = JavaLikeClient()
    try:
        for i in range(6):
            resp = await client.send(master.address, "RT", b"m%d" % i)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        await client.close()
    await dispatched(master, "RT", 6)
    await wait_until(lambda: slave.store.max_offset_in_queue("RT", 0) == 6, 10)
    consumer = PullConsumer("readers", namesrv.address)
    await consumer.start()
    try:
        (mq,) = await consumer.fetch_queues("RT")
        first = await consumer.pull(mq, 0, max_nums=2)
        assert first.status is PullStatus.FOUND
        assert [m.queue_offset for m in first.msgs] == [0, 1]
        assert master.runtime.stats.get_total == 2
        assert slave.runtime.stats.get_total == 0
        second = await consumer.pull(mq, first.next_begin_offset, max_nums=2)
        assert [m.queue_offset for m in second.msgs] == [2, 3]
        assert slave.runtime.stats.get_total == 2
        assert master.runtime.stats.get_total == 2
        third = await consumer.pull(mq, second.next_begin_offset, max_nums=32)
        assert [m.queue_offset for m in third.msgs] == [4, 5]
        assert master.runtime.stats.get_total == 4
        fourth = await consumer.pull(mq, third.next_begin_offset, max_nums=32)
        assert fourth.status is PullStatus.NO_MATCHED_MSG
        assert slave.runtime.stats.get_total == 2
        fifth = await consumer.pull(mq, third.next_begin_offset, max_nums=32)
        assert fifth.status is PullStatus.NO_NEW_MSG
    finally:
        await consumer.shutdown()


async def test_slave_read_disabled_always_suggests_master(
    broker_factory: BrokerFactory, client: JavaLikeClient, tmp_path: Path
) -> None:
    """1. A master without slaveReadEnable but with accessMessageInMemoryMaxRatio=0.
    2. Send 3 messages and pull 1 (far behind by the ratio).
    Expected: suggestWhichBrokerId is 0: the suggestion needs slaveReadEnable."""
    master = await broker_factory(store_root=tmp_path / "m", accessMessageInMemoryMaxRatio=0)
    for i in range(3):
        await client.send(master.address, "RT2", b"x%d" % i)
    await dispatched(master, "RT2", 3)
    await client.heartbeat(master.address, "g")
    resp = await client.pull(master.address, "g", "RT2", 0, max_nums=1, expression="*")
    assert resp.code == ResponseCode.SUCCESS
    assert resp.ext("suggestWhichBrokerId") == "0"
