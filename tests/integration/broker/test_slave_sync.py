"""SlaveSynchronize between an in-process master and slave (ha.md section 2.5, issue 8)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocketpy.broker.config_files import consumer_offset_path, delay_offset_path, topics_path
from rocketpy.broker.service import BrokerService
from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.namesrv.service import NamesrvService
from tests.helpers.broker_client import JavaLikeClient
from tests.integration.broker.conftest import BrokerFactory, dispatched

SLAVE = {"brokerId": 1, "brokerRole": "SLAVE", "slaveSynchronizeIntervalMs": 100}


async def _commit(
    client: JavaLikeClient, addr: str, group: str, queue_id: int, offset: int
) -> None:
    ext = {"consumerGroup": group, "topic": "SyncT", "queueId": str(queue_id),
           "commitOffset": str(offset)}  # fmt: skip
    resp = await client.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def _master_with_metadata(
    broker_factory: BrokerFactory, namesrv: NamesrvService, client: JavaLikeClient, tmp: Path
) -> BrokerService:
    master = await broker_factory(store_root=tmp / "master", brokerId=0)
    admin = AdminClient(namesrv.address)
    try:
        await admin.create_topic(master.address, TopicSpec(topic="SyncT", read_queue_nums=2,
                                                           write_queue_nums=2))  # fmt: skip
        await admin.create_subscription_group(master.address, {"groupName": "g1"})
        await admin.create_subscription_group(master.address, {"groupName": "g2"})
    finally:
        await admin.close()
    await _commit(client, master.address, "g1", 0, 5)
    # a delayed message (level 1 = 1 s) moves the master's delay progress of level 1 to 1
    resp = await client.send(master.address, "SyncT", b"later", props={"DELAY": "1"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await dispatched(master, "SyncT", 1)
    return master


async def test_slave_sync_copies_topics_groups_offsets_and_delay_progress(
    broker_factory: BrokerFactory, namesrv: NamesrvService, client: JavaLikeClient, tmp_path: Path
) -> None:
    """1. A master gets topic SyncT, group g1, offset SyncT@g1 q0 = 5 and a delayed message that
    it delivers (delay progress of level 1 = 1).
    2. A SLAVE of the same broker name starts (sync interval 100 ms); it learns the master's
    address from its NameServer registration.
    Expected: the slave has SyncT with the master's DataVersion, g1, the offset 5 and delay
    progress 1, both in memory and in its config/*.json files."""
    master = await _master_with_metadata(broker_factory, namesrv, client, tmp_path)
    slave = await broker_factory(store_root=tmp_path / "slave", **SLAVE)

    def synced() -> bool:
        return (
            slave.offsets.query_offset("g1", "SyncT", 0) == 5
            and slave.schedule.snapshot().offset_table.get(1) == 1
            and slave.groups.get("g1") is not None
            and slave.topics.data_version == master.topics.data_version
        )

    await wait_until(synced, 10)
    assert slave.slave_sync.master_addr == master.address
    found = slave.topics.select("SyncT")
    assert found is not None
    assert found.read_queue_nums == 2
    root = tmp_path / "slave"
    await wait_until(lambda: '"SyncT"' in _text(topics_path(root)), 5)
    await wait_until(lambda: "SyncT@g1" in _text(consumer_offset_path(root)), 5)
    await wait_until(delay_offset_path(root).exists, 5)


async def test_slave_sync_master_offsets_win_local_keys_stay(
    broker_factory: BrokerFactory, namesrv: NamesrvService, client: JavaLikeClient, tmp_path: Path
) -> None:
    """1. Master with groups g1, g2, SyncT@g1 q0 = 5 and a synced slave.
    2. A consumer commits SyncT@g1 q0 = 9 and SyncT@g2 q1 = 4 to the slave (5.x keeps commits
    sent to a slave, ConsumerManageProcessor).
    3. The master commits SyncT@g1 q0 = 6.
    Expected: after the next syncs the slave has q0 = 6 for g1 (the master's entry replaces the
    slave's, offsetTable.putAll) and still has its own g2 entry, which the master never had."""
    master = await _master_with_metadata(broker_factory, namesrv, client, tmp_path)
    slave = await broker_factory(store_root=tmp_path / "slave", **SLAVE)
    await wait_until(lambda: slave.offsets.query_offset("g1", "SyncT", 0) == 5, 10)
    await wait_until(lambda: slave.groups.get("g2") is not None, 10)
    await _commit(client, slave.address, "g1", 0, 9)
    await _commit(client, slave.address, "g2", 1, 4)
    assert slave.offsets.query_offset("g1", "SyncT", 0) == 9
    await _commit(client, master.address, "g1", 0, 6)
    await wait_until(lambda: slave.offsets.query_offset("g1", "SyncT", 0) == 6, 10)
    before = slave.slave_sync.statistics().syncs
    await wait_until(lambda: slave.slave_sync.statistics().syncs >= before + 2, 10)
    assert slave.offsets.query_offset("g2", "SyncT", 1) == 4
    assert master.offsets.query_offset("g2", "SyncT", 1) == -1


async def test_slave_sync_removes_topics_the_master_deleted(
    broker_factory: BrokerFactory, namesrv: NamesrvService, client: JavaLikeClient, tmp_path: Path
) -> None:
    """1. Master with SyncT and a synced slave. 2. The master deletes SyncT.
    Expected: the slave drops SyncT once the master's new DataVersion arrives; a master never
    syncs from anyone (its synchronizer has no master address)."""
    master = await _master_with_metadata(broker_factory, namesrv, client, tmp_path)
    slave = await broker_factory(store_root=tmp_path / "slave", **SLAVE)
    await wait_until(lambda: slave.topics.select("SyncT") is not None, 10)
    admin = AdminClient(namesrv.address)
    try:
        await admin.delete_topic_in_broker(master.address, "SyncT")
    finally:
        await admin.close()
    await wait_until(lambda: slave.topics.select("SyncT") is None, 10)
    async with asyncio.timeout(5):
        assert await master.slave_sync.sync_all() is False
    assert master.slave_sync.master_addr is None


def _text(path: Path) -> str:
    """The file's text, empty while it does not exist (the atomic persist renames the old file
    to ``.bak`` before the new one takes its name)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


async def test_sync_in_flight_across_a_role_change_applies_nothing(
    broker_factory: BrokerFactory, namesrv: NamesrvService, client: JavaLikeClient, tmp_path: Path
) -> None:
    """1. Master with SyncT and a slave synced once (then a 10-minute interval). 2. The master
    creates topic Later (a new DataVersion). 3. A sync starts; while its requests are in flight
    the slave becomes master (controller mode's role change).
    Expected: the sync reports failure and applies nothing: no Later, the slave's own
    DataVersion kept. (A sync that finished after a role change once gave a new master the old
    master's DataVersion, and with it the old stateVersion: the NameServer then handed
    brokerId 0 back to the returning old master.)"""
    master = await _master_with_metadata(broker_factory, namesrv, client, tmp_path)
    slave = await broker_factory(
        store_root=tmp_path / "slave", **{**SLAVE, "slaveSynchronizeIntervalMs": 600_000}
    )
    await wait_until(lambda: slave.topics.select("SyncT") is not None, 10)
    admin = AdminClient(namesrv.address)
    try:
        await admin.create_topic(master.address, TopicSpec(topic="Later"))
    finally:
        await admin.close()
    before = slave.topics.data_version
    syncing = asyncio.create_task(slave.slave_sync.sync_all())
    await asyncio.sleep(0)
    slave.runtime.is_slave = False
    try:
        async with asyncio.timeout(5):
            assert await syncing is False
        assert slave.topics.select("Later") is None
        assert slave.topics.data_version == before
    finally:
        slave.runtime.is_slave = True
    async with asyncio.timeout(5):
        assert await slave.slave_sync.sync_all() is True
    assert slave.topics.select("Later") is not None
