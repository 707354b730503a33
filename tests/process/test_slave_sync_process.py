"""Slave metadata sync between real broker processes (ha.md 2.5, SlaveSynchronize; issue 8)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketpy.broker.config_files import consumer_offset_path, topics_path
from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.processes import Daemon, start_broker, start_namesrv

pytestmark = pytest.mark.process

HA_KEYS = "haListenPort=0\nhaSendHeartbeatInterval=200\nhaReconnectInterval=100\n"
MASTER = HA_KEYS + "brokerId=0\nbrokerRole=ASYNC_MASTER\n"
SLAVE = HA_KEYS + "brokerId=1\nbrokerRole=SLAVE\nslaveSynchronizeIntervalMs=200\n"


def _text(path: Path) -> str:
    """The file's text, "" while it does not exist -- also for the moment of each rewrite in
    which it does not (upstream's order: the file renamed to .bak, then .tmp renamed to it)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


async def _scenario(ns: str, master: str, slave: str, slave_store: Path) -> None:
    admin = AdminClient(ns)
    client = JavaLikeClient()
    try:
        await admin.create_topic(master, TopicSpec(topic="ProcSync", read_queue_nums=4,
                                                   write_queue_nums=4))  # fmt: skip
        await admin.create_subscription_group(master, {"groupName": "pg"})
        ext = {"consumerGroup": "pg", "topic": "ProcSync", "queueId": "3", "commitOffset": "42"}
        resp = await client.call(master, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        # the slave persists what it synced: its files say when to ask it
        await wait_until(
            lambda: (
                '"ProcSync"' in _text(topics_path(slave_store))
                and "ProcSync@pg" in _text(consumer_offset_path(slave_store))
            ),
            15,
        )
        query = {"consumerGroup": "pg", "topic": "ProcSync", "queueId": "3"}
        resp = await client.call(slave, RequestCode.QUERY_CONSUMER_OFFSET, query)
        assert (resp.code, resp.ext("offset")) == (ResponseCode.SUCCESS, "42"), resp.remark
        resp = await client.call(slave, RequestCode.GET_TOPIC_CONFIG, {"topic": "ProcSync"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        await client.close()
        await admin.close()


def test_slave_sync_process_topic_and_offset_reach_slave(tmp_path: Path) -> None:
    """1. mqnamesrv, an ASYNC_MASTER and a SLAVE (sync every 200 ms) as processes.
    2. On the master: create topic ProcSync, group pg, commit ProcSync@pg queue 3 = 42.
    Expected: the slave's config/topics.json and consumerOffset.json come to hold them, and
    the slave answers QUERY_CONSUMER_OFFSET with 42 and GET_TOPIC_CONFIG for ProcSync."""
    namesrv, ns = start_namesrv(tmp_path)
    slave_store = tmp_path / "slave-store"
    daemons: list[Daemon] = []
    try:
        master_daemon, master = start_broker(tmp_path, ns, extra=MASTER, tag="master")
        daemons.append(master_daemon)
        slave_daemon, slave = start_broker(
            tmp_path, ns, extra=SLAVE, tag="slave", store=slave_store
        )
        daemons.append(slave_daemon)
        asyncio.run(_scenario(ns, master, slave, slave_store))
    finally:
        for d in reversed(daemons):
            d.stop()
        assert namesrv.stop() == 0, namesrv.output()
