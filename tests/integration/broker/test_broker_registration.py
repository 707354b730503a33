"""Registration with the NameServer: periodic, light path, unregistration; admin config (C-19)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import StoreError
from rocketpy.common.properties import parse_properties
from rocketpy.namesrv.route_info import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS, BrokerKey
from rocketpy.namesrv.service import NamesrvService
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import Processor, RequestContext
from tests.helpers.broker_client import JavaLikeClient
from tests.integration.broker.conftest import BrokerFactory

pytestmark = pytest.mark.integration


async def test_broker_light_registration_and_clean_unregister(
    namesrv: NamesrvService, broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Start a broker with forceRegister=false and a 100 ms period. 2. Let several periods
    pass. 3. Create a topic through UPDATE_AND_CREATE_TOPIC. 4. Stop the broker.
    Expected: between changes only QUERY_DATA_VERSION reaches the NameServer (one
    REGISTER_BROKER at start, one after the topic change) and the NameServer holds the broker's
    data version; the new topic is routable; after stop the broker is gone from the NameServer.
    """
    seen: list[int] = []
    for code in (RequestCode.REGISTER_BROKER, RequestCode.QUERY_DATA_VERSION):
        original = namesrv.registry.lookup(code)
        assert original is not None

        async def counting(
            ctx: RequestContext, req: RemotingCommand, _orig: Processor = original
        ) -> RemotingCommand | None:
            seen.append(req.code)
            return await _orig(ctx, req)

        namesrv.registry.register(code, counting)
    broker = await broker_factory(forceRegister=False, registerNameServerPeriod=100)
    cluster, addr = "DefaultCluster", broker.address
    await wait_until(lambda: seen.count(RequestCode.QUERY_DATA_VERSION) >= 5, 5)
    assert seen.count(RequestCode.REGISTER_BROKER) == 1

    def ns_version_counter() -> int:
        version = namesrv.routes.data_version_of(cluster, addr)
        return -1 if version is None else version.counter

    await wait_until(lambda: ns_version_counter() == broker.topics.data_version.counter, 5)
    create = {
        "topic": "Created",
        "defaultTopic": "TBW102",
        "readQueueNums": "2",
        "writeQueueNums": "2",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "order": "false",
    }
    assert (await client.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create)).code == 0
    await wait_until(lambda: ns_version_counter() == broker.topics.data_version.counter, 5)
    route = await client.call(
        namesrv.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Created"}
    )
    assert route.code == ResponseCode.SUCCESS
    async with asyncio.timeout(10):
        await broker.stop()
    assert namesrv.routes.data_version_of(cluster, addr) is None


async def test_c19_broker_config_black_list(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """C-19 / P-10: 1. GET_BROKER_CONFIG. 2. UPDATE_BROKER_CONFIG with a harmless key.
    3. With storePathRootDir, then with configBlackList.
    Expected: the body lists brokerName; the harmless update applies (visible in the next
    GET); path and black-list keys answer NO_PERMISSION "Can not update config in black list."
    and change nothing."""
    broker = await broker_factory()
    addr = broker.address
    got = await client.call(addr, RequestCode.GET_BROKER_CONFIG)
    assert got.body is not None
    assert parse_properties(got.body.decode())["brokerName"] == "broker-a"
    assert got.ext("version") is not None
    upd = await client.call(addr, RequestCode.UPDATE_BROKER_CONFIG, None, b"traceOn=false\n")
    assert upd.code == ResponseCode.SUCCESS
    assert broker.config.trace_on is False
    for body in (b"storePathRootDir=/tmp/evil\n", b"configBlackList=x\n", b"brokerConfigPath=/x\n"):
        refused = await client.call(addr, RequestCode.UPDATE_BROKER_CONFIG, None, body)
        assert (refused.code, refused.remark) == (
            ResponseCode.NO_PERMISSION,
            "Can not update config in black list.",
        )
    assert broker.config.config_black_list == "configBlackList;brokerConfigPath"
    sent = await client.send(addr, "T", b"x")
    assert sent.ext("TRACE_ON") == "false"


async def test_broker_failed_start_releases_and_keeps_files(
    namesrv: NamesrvService, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """1. A damaged topics.json (and no .bak). 2. Start a broker on that store root.
    3. Occupy a port, start a broker on it.
    Expected: the first start raises StoreError and leaves topics.json byte-identical; the
    second raises OSError (address in use) and the store root is usable by a next broker."""
    root = tmp_path / "damaged"
    (root / "config").mkdir(parents=True)
    (root / "config" / "topics.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(StoreError):
        await broker_factory(store_root=root)
    assert (root / "config" / "topics.json").read_text(encoding="utf-8") == "{not json"
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    try:
        with pytest.raises(OSError, match="in use"):
            await broker_factory(store_root=tmp_path / "ok", listenPort=blocker.getsockname()[1])
    finally:
        blocker.close()
    again = await broker_factory(store_root=tmp_path / "ok")
    assert again.server.port != 0


async def test_broker_registration_keeps_namesrv_default_timeout(
    namesrv: NamesrvService, broker_factory: BrokerFactory
) -> None:
    """1. Start a broker without acting master (registration every 30 s). 2. Look at the
    NameServer's live entry for it.
    Expected: the broker sent no heartbeatTimeoutMillis, so the NameServer keeps its 120 s
    default -- longer than the registration period -- instead of expiring the broker after 10 s
    between two registrations (upstream sends the timeout only with enableSlaveActingMaster)."""
    broker = await broker_factory(registerNameServerPeriod=30_000)
    live = namesrv.routes.broker_live_table[BrokerKey("DefaultCluster", broker.address)]
    assert live.heartbeat_timeout_ms == DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS
    assert live.heartbeat_timeout_ms > 30_000
