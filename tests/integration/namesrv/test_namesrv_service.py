"""A NamesrvService on a loopback port, driven over TCP as brokers, clients and mqadmin drive it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketpy.common import fastjson
from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.namesrv.config import NamesrvConfig
from rocketpy.namesrv.service import NamesrvService
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.dispatch import ProcessorRegistry, RequestContext
from tests.helpers.brokers import register_broker

pytestmark = pytest.mark.integration


def _config(tmp: Path, **extra: object) -> NamesrvConfig:
    return NamesrvConfig.build(
        {
            "listenPort": 0,
            "bindAddress": "127.0.0.1",
            "kvConfigPath": str(tmp / "kvConfig.json"),
            "configStorePath": str(tmp / "namesrv.properties"),
            "scanNotActiveBrokerInterval": 50,
            **extra,
        }
    )


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvService]:
    service = NamesrvService(_config(tmp_path))
    await service.start()
    yield service
    await service.stop()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


async def _route(
    client: RemotingClient, addr: str, topic: str, version: int = 479
) -> RemotingCommand:
    req = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, version=version
    )
    return await client.invoke(addr, req, 5)


async def test_namesrv_register_then_route(namesrv: NamesrvService, client: RemotingClient) -> None:
    """1. Register a master. 2. Route lookup. 3. Standard JSON for 5.x, integer keys for 4.6."""
    assert (await register_broker(client, namesrv.address)).code == ResponseCode.SUCCESS
    new = await _route(client, namesrv.address, "TopicTest")
    assert new.code == ResponseCode.SUCCESS
    assert new.body is not None
    assert b'"brokerAddrs":{"0":"127.0.0.1:10911"}' in new.body
    old = await _route(client, namesrv.address, "TopicTest", version=333)
    assert old.body is not None
    assert b'"brokerAddrs":{0:"127.0.0.1:10911"}' in old.body


async def test_namesrv_unknown_topic(namesrv: NamesrvService, client: RemotingClient) -> None:
    """An unknown topic answers TOPIC_NOT_EXIST with upstream's remark and no body."""
    resp = await _route(client, namesrv.address, "Missing")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.remark is not None
    assert resp.remark.startswith("No topic route info in name server for the topic: Missing")
    assert resp.body is None


async def test_namesrv_slave_learns_master(namesrv: NamesrvService, client: RemotingClient) -> None:
    """A slave's registration answer carries the master's address and HA address."""
    await register_broker(client, namesrv.address)
    resp = await register_broker(client, namesrv.address, broker_id=1, addr="127.0.0.1:20911")
    assert resp.ext_fields == {"masterAddr": "127.0.0.1:10911", "haServerAddr": "127.0.0.1:10912"}


async def test_namesrv_cluster_info_and_topic_lists(
    namesrv: NamesrvService, client: RemotingClient
) -> None:
    """106, 206, 224, 304 reflect the registered broker."""
    await register_broker(client, namesrv.address)
    info = await client.invoke(
        namesrv.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5
    )
    assert info.body is not None
    obj = fastjson.loads(info.body)
    assert obj["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    assert b'"brokerAddrs":{0:"127.0.0.1:10911"}' in info.body
    for code, ext in (
        (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, None),
        (RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"}),
    ):
        resp = await client.invoke(namesrv.address, RemotingCommand.request(code, ext), 5)
        assert sorted(fastjson.loads(resp.body or b"")["topicList"]) == ["TBW102", "TopicTest"]


async def test_n_expiry_and_heartbeat(tmp_path: Path, client: RemotingClient) -> None:
    """N: a broker with a 500 ms heartbeat timeout is kept alive by 904 and expires without it;
    the NameServer closes the expired broker's channel."""
    service = NamesrvService(_config(tmp_path))
    await service.start()
    broker = RemotingClient()
    try:
        await register_broker(broker, service.address, heartbeat_timeout_ms=500)
        hb = {
            "clusterName": "DefaultCluster",
            "brokerAddr": "127.0.0.1:10911",
            "brokerName": "broker-a",
        }
        for _ in range(8):
            await asyncio.sleep(0.1)
            await broker.invoke(
                service.address, RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, hb), 5
            )
        assert (await _route(client, service.address, "TopicTest")).code == ResponseCode.SUCCESS
        conn = await broker.connection(service.address)
        await wait_until(lambda: not service.routes.broker_live_table, 5)
        async with asyncio.timeout(5):
            await conn.closed_event.wait()
        assert (
            await _route(client, service.address, "TopicTest")
        ).code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await broker.close()
        await service.stop()


async def test_n_closed_channel_unregisters(namesrv: NamesrvService) -> None:
    """N: closing the broker's connection removes it from the routes."""
    broker = RemotingClient()
    await register_broker(broker, namesrv.address)
    assert namesrv.routes.broker_live_table
    await broker.close()
    await wait_until(lambda: not namesrv.routes.broker_live_table, 5)
    assert namesrv.routes.pickup_topic_route("TopicTest", support_acting_master=False) is None


async def test_n_acting_master_and_min_id_notification(tmp_path: Path) -> None:
    """N: with supportActingMaster, the master's leaving makes the min slave act as id 0 and the
    remaining brokers receive NOTIFY_MIN_BROKER_ID_CHANGE."""
    service = NamesrvService(
        _config(tmp_path, supportActingMaster=True, notifyMinBrokerIdChanged=True)
    )
    await service.start()
    notified: list[dict[str, str]] = []
    reg = ProcessorRegistry()

    async def on_notify(ctx: RequestContext, req: RemotingCommand) -> None:
        notified.append(dict(req.ext_fields or {}))

    reg.register(RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, on_notify)
    master, slave = RemotingClient(), RemotingClient(registry=reg)
    try:
        await register_broker(master, service.address, enable_acting_master=True)
        await register_broker(
            slave, service.address, broker_id=1, addr="127.0.0.1:20911", enable_acting_master=True
        )
        notified.clear()
        await master.close()
        await wait_until(lambda: bool(notified), 5)
        assert notified[0]["minBrokerId"] == "1"
        assert notified[0]["offlineBrokerAddr"] == "127.0.0.1:10911"
        client = RemotingClient()
        route = await _route(client, service.address, "TopicTest")
        await client.close()
        obj = fastjson.loads(route.body or b"")
        assert obj["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:20911"}
        assert obj["queueDatas"][0]["perm"] & 2 == 0
    finally:
        await slave.close()
        await service.stop()


async def test_namesrv_kv_config_persists_across_restart(tmp_path: Path) -> None:
    """KV config written through 100 is read back by a restarted NameServer (101, 219)."""
    for step in range(2):
        service = NamesrvService(_config(tmp_path))
        await service.start()
        client = RemotingClient()
        try:
            if step == 0:
                ext = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"}
                put = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, ext)
                assert (await client.invoke(service.address, put, 5)).code == ResponseCode.SUCCESS
            else:
                get = RemotingCommand.request(
                    RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}
                )
                assert (await client.invoke(service.address, get, 5)).ext_fields == {
                    "value": "broker-a:4"
                }
                missing = RemotingCommand.request(
                    RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "none"}
                )
                resp = await client.invoke(service.address, missing, 5)
                assert resp.code == ResponseCode.QUERY_NOT_FOUND
        finally:
            await client.close()
            await service.stop()


async def test_namesrv_config_update_and_black_list(
    namesrv: NamesrvService, client: RemotingClient
) -> None:
    """318 updates a key and 319 shows it; black-listed keys answer NO_PERMISSION."""
    ok = RemotingCommand.request(
        RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n"
    )
    assert (await client.invoke(namesrv.address, ok, 5)).code == ResponseCode.SUCCESS
    assert namesrv.config.order_message_enable
    bad = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/etc/x\n")
    resp = await client.invoke(namesrv.address, bad, 5)
    assert (resp.code, resp.remark) == (
        ResponseCode.NO_PERMISSION,
        "Can not update config in black list.",
    )
    got = await client.invoke(
        namesrv.address, RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG), 5
    )
    assert b"orderMessageEnable=true" in (got.body or b"")


async def test_namesrv_missing_header_and_bad_crc(
    namesrv: NamesrvService, client: RemotingClient
) -> None:
    """A missing mandatory field is SYSTEM_ERROR naming it; a wrong body CRC is refused."""
    resp = await client.invoke(
        namesrv.address, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}), 5
    )
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "<topic>" in (resp.remark or "")
    ext = {
        "brokerName": "b",
        "brokerAddr": "a:1",
        "clusterName": "c",
        "haServerAddr": "a:2",
        "brokerId": "0",
        "bodyCrc32": "12345",
    }
    bad = RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, b"{}")
    resp = await client.invoke(namesrv.address, bad, 5)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
