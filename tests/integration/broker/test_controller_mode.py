"""In-process brokers in controller mode against an in-process controller (one-member group):
persistent ids (R-01..R-03), start-up (B-01), role-change notifications and the metadata sync
that catches a missed one, GET_BROKER_EPOCH_CACHE, and the SyncStateSet report API
(controller.md sections 8-10)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from rocketpy.broker.service import BrokerService
from rocketpy.common import fastjson
from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.controller.config import ControllerConfig
from rocketpy.controller.service import ControllerService
from rocketpy.controller.state_machine import ControllerStateMachine
from rocketpy.namesrv.route_info import BrokerKey
from rocketpy.namesrv.service import NamesrvService
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.store.broker_identity import (
    TempBrokerMetadata,
    encode_temp_broker_metadata,
)
from rocketpy.store.epoch_cache import EpochFileCache
from rocketpy.store.epoch_entries import EpochEntry
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.controller_client import FakeBroker
from tests.helpers.controller_node import SoloNode

pytestmark = pytest.mark.integration

Controller = Callable[..., Awaitable[ControllerService]]


@pytest.fixture
async def controller_factory(tmp_path: Path) -> AsyncIterator[Controller]:
    """Start one in-process controller (SoloNode) with 100 ms scans; extra keys override."""
    started: list[ControllerService] = []

    async def make(**extra: object) -> ControllerService:
        values: dict[str, object] = {
            "controllerDLegerPeers": "n0-127.0.0.1:0",
            "controllerDLegerSelfId": "n0",
            "controllerStorePath": str(tmp_path / "raft"),
            "configStorePath": str(tmp_path / "controller.properties"),
            "scanNotActiveBrokerInterval": 100,
            "scanInactiveMasterInterval": 100,
            "controllerStartupGraceMs": 0,
        }
        values.update(extra)
        svc = ControllerService(ControllerConfig.build(values), node_factory=_solo)
        await svc.start()
        assert isinstance(svc.node, SoloNode)
        svc.node.address = svc.address  # GET_METADATA_INFO names the bound port
        await wait_until(lambda: svc.pipeline.serving, 2)
        started.append(svc)
        return svc

    yield make
    for svc in started:
        async with asyncio.timeout(10):
            await svc.stop()


def _solo(config: ControllerConfig, sm: ControllerStateMachine) -> SoloNode:
    return SoloNode(sm)


Broker = Callable[..., Awaitable[BrokerService]]


@pytest.fixture
def ctl_broker(broker_factory: Callable[..., Awaitable[BrokerService]], tmp_path: Path) -> Broker:
    """``ctl_broker(controller, tag)``: a controller-mode broker-a with its store in tmp/tag."""

    async def make(controller: ControllerService, tag: str, **extra: object) -> BrokerService:
        keys: dict[str, object] = {
            "enableControllerMode": True,
            "controllerAddr": controller.address,
            "brokerHeartbeatInterval": 100,
            "controllerHeartBeatTimeoutMills": 1000,
            "syncBrokerMetadataPeriod": 200,
            "checkSyncStateSetPeriod": 200,
            "syncControllerMetadataPeriod": 500,
        }
        keys.update(extra)
        return await broker_factory(store_root=tmp_path / tag, **keys)

    return make


def _routes(namesrv: NamesrvService) -> dict[int, str]:
    data = namesrv.routes.broker_addr_table.get("broker-a")
    return dict(data.broker_addrs) if data else {}


async def _send(addr: str) -> int:
    client = JavaLikeClient()
    try:
        return (await client.send(addr, "CtlTopic", b"x")).code
    finally:
        await client.close()


async def test_r01_b01_first_start_gets_id_1_becomes_master_and_registers_as_id_0(
    controller_factory: Controller, ctl_broker: Broker, namesrv: NamesrvService, tmp_path: Path
) -> None:
    """R-01, B-01: 1. start a controller and one controller-mode broker on an empty store.
    Expected: id 1 in ``brokerIdentity`` (no temp file left); the broker is master of epoch 1,
    its epoch file holds (1, 0); the NameServer has it as brokerId 0 with DataVersion
    stateVersion 1; it accepts a send; GET_BROKER_EPOCH_CACHE lists epoch 1."""
    ctl = await controller_factory()
    broker = await ctl_broker(ctl, "b1")
    stats = broker.replicas.statistics() if broker.replicas else None
    assert stats is not None
    assert (stats.broker_controller_id, stats.is_master, stats.master_epoch) == (1, True, 1)
    assert (tmp_path / "b1" / "brokerIdentity").read_text() == "DefaultCluster#broker-a#1"
    assert not (tmp_path / "b1" / "brokerIdentity-temp").exists()
    assert (tmp_path / "b1" / "epochFileCheckpoint").read_text().endswith("1-0\n")
    await wait_until(lambda: _routes(namesrv) == {0: broker.address}, 3)
    live = namesrv.routes.broker_live_table[BrokerKey("DefaultCluster", broker.address)]
    assert live.data_version.state_version == 1
    assert await _send(broker.address) == ResponseCode.SUCCESS
    client = RemotingClient(name="t")
    try:
        request = RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE, None)
        resp = await client.invoke(broker.address, request, 5)
    finally:
        await client.close()
    body = fastjson.loads(resp.body or b"{}")
    assert (body["brokerId"], [e["epoch"] for e in body["epochList"]]) == (0, [1])


async def test_master_stepping_down_stores_no_send(
    controller_factory: Controller, ctl_broker: Broker
) -> None:
    """The window of a role change: 1. a controller-mode broker is master and accepts a send.
    2. Its HA service turns slave (as a role change does first; the broker stops taking sends
    only once the change is done) and a send arrives in between.
    Expected: SERVICE_NOT_AVAILABLE and nothing appended -- a SEND_OK here would acknowledge a
    write the new master never had, cut when this broker truncates to its history."""
    ctl = await controller_factory()
    broker = await ctl_broker(ctl, "b1", ha={"allAckInSyncStateSet": True})
    assert await _send(broker.address) == ResponseCode.SUCCESS
    assert broker.auto_ha is not None
    assert not broker.runtime.is_slave
    end = broker.auto_ha.store.max_phy_offset
    assert await broker.auto_ha.change_to_slave(None, 2, 1)
    assert await _send(broker.address) == ResponseCode.SERVICE_NOT_AVAILABLE
    assert broker.auto_ha.store.max_phy_offset == end


async def test_r02_temp_file_left_by_crash_reapplies_same_id(
    controller_factory: Controller, ctl_broker: Broker, tmp_path: Path
) -> None:
    """R-02 (c, d): 1. the controller already applied id 1 with check code C (the broker died
    before writing ``brokerIdentity``); 2. the broker restarts with ``brokerIdentity-temp``
    holding (1, C). Expected: it re-applies 1 with C (accepted, idempotent), writes
    ``brokerIdentity`` with id 1, deletes the temp file, and the controller's next id is 2."""
    ctl = await controller_factory()
    code = "127.0.0.1:1;1700000000000"
    fake = FakeBroker(RemotingClient(name="fake"), 1, "127.0.0.1:1")
    fake.check_code = code
    try:
        assert (await fake.apply_id(ctl.address)).code == ResponseCode.SUCCESS
        root = tmp_path / "b1"
        root.mkdir()
        temp = TempBrokerMetadata(
            cluster_name="DefaultCluster", broker_name="broker-a", broker_id=1,
            register_check_code=code,
        )  # fmt: skip
        (root / "brokerIdentity-temp").write_bytes(encode_temp_broker_metadata(temp))
        broker = await ctl_broker(ctl, "b1")
        assert broker.replicas is not None
        assert broker.replicas.broker_controller_id == 1
        assert (root / "brokerIdentity").read_text() == "DefaultCluster#broker-a#1"
        assert not (root / "brokerIdentity-temp").exists()
        assert (await fake.next_id(ctl.address)).ext("nextBrokerId") == "2"
    finally:
        await fake.client.close()


async def test_r02_refused_temp_id_is_dropped_and_a_new_id_allocated(
    controller_factory: Controller, ctl_broker: Broker, tmp_path: Path
) -> None:
    """R-02: 1. another replica holds id 1 (other check code); 2. the broker starts with a temp
    file claiming id 1. Expected: APPLY_BROKER_ID is refused (2014), the temp file is deleted,
    and the retry allocates id 2 -- never two brokers with one id."""
    ctl = await controller_factory()
    other = FakeBroker(RemotingClient(name="other"), 1, "127.0.0.1:1")
    try:
        assert (await other.apply_id(ctl.address)).code == ResponseCode.SUCCESS
        root = tmp_path / "b2"
        root.mkdir()
        temp = TempBrokerMetadata(
            cluster_name="DefaultCluster", broker_name="broker-a", broker_id=1,
            register_check_code="127.0.0.1:2;1",
        )  # fmt: skip
        (root / "brokerIdentity-temp").write_bytes(encode_temp_broker_metadata(temp))
        broker = await ctl_broker(ctl, "b2")
        assert broker.replicas is not None
        await wait_until(lambda: broker.replicas is not None and broker.replicas.role_known, 5)
        assert broker.replicas.broker_controller_id == 2
        assert (root / "brokerIdentity").read_text() == "DefaultCluster#broker-a#2"
    finally:
        await other.client.close()


async def test_r03_identity_of_another_broker_stops_registration(
    controller_factory: Controller, ctl_broker: Broker, namesrv: NamesrvService, tmp_path: Path
) -> None:
    """R-03: 1. ``brokerIdentity`` names broker-b; 2. broker-a starts on that store.
    Expected: no id is allocated (the controller does not know broker-a), the broker takes no
    role (fenced: sends refused, not in the NameServer) and the file is left untouched."""
    ctl = await controller_factory()
    root = tmp_path / "b1"
    root.mkdir()
    (root / "brokerIdentity").write_text("DefaultCluster#broker-b#7")
    broker = await ctl_broker(ctl, "b1")
    assert broker.replicas is not None
    assert broker.replicas.broker_controller_id is None
    assert not broker.replicas.role_known
    assert "broker-a" not in ctl.manager.replica_info_table
    assert await _send(broker.address) != ResponseCode.SUCCESS
    assert _routes(namesrv) == {}
    assert (root / "brokerIdentity").read_text() == "DefaultCluster#broker-b#7"


async def test_second_broker_follows_and_stale_notification_is_ignored(
    controller_factory: Controller, ctl_broker: Broker, namesrv: NamesrvService
) -> None:
    """controller.md 8: 1. b1 starts (master, epoch 1), b2 starts (slave of 1, id 2);
    2. a NOTIFY_BROKER_ROLE_CHANGED naming b2 master with epoch 1 (not newer) reaches b2.
    Expected: b2 stays slave (SYSTEM_BUSY on send); the NameServer shows {0: b1, 2: b2}."""
    ctl = await controller_factory()
    b1 = await ctl_broker(ctl, "b1")
    b2 = await ctl_broker(ctl, "b2")
    assert b2.replicas is not None
    stats = b2.replicas.statistics()
    assert (stats.broker_controller_id, stats.is_master, stats.master_broker_id) == (2, False, 1)
    client = RemotingClient(name="t")
    try:
        ext = {"masterBrokerId": "2", "masterAddress": b2.address, "masterEpoch": "1",
               "syncStateSetEpoch": "5"}  # fmt: skip
        note = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, ext, oneway=True)
        await client.invoke_oneway(b2.address, note)
        await wait_until(lambda: _routes(namesrv) == {0: b1.address, 2: b2.address}, 3)
    finally:
        await client.close()
    assert not b2.replicas.is_master
    assert await _send(b2.address) == ResponseCode.SYSTEM_BUSY


async def test_missed_notification_is_caught_by_replica_info_sync(
    controller_factory: Controller, ctl_broker: Broker, namesrv: NamesrvService
) -> None:
    """controller.md 10 (metadata sync): 1. the controller does not push notifications and may
    elect outside the SyncStateSet; 2. b1 (master) and b2 (slave) start; 3. b1 stops. Expected:
    the controller elects b2 (epoch 2) and b2 learns it from CONTROLLER_GET_REPLICA_INFO within a
    few sync periods: it becomes master, registers as brokerId 0 and accepts sends."""
    ctl = await controller_factory(notifyBrokerRoleChanged=False, enableElectUncleanMaster=True)
    b1 = await ctl_broker(ctl, "b1")
    b2 = await ctl_broker(ctl, "b2")
    async with asyncio.timeout(10):
        await b1.stop()
    await wait_until(lambda: b2.replicas is not None and b2.replicas.is_master, 5)
    assert b2.replicas is not None
    assert b2.replicas.master_epoch == 2
    await wait_until(lambda: _routes(namesrv) == {0: b2.address}, 3)
    assert await _send(b2.address) == ResponseCode.SUCCESS


async def test_alter_sync_state_set_reports_to_controller(
    controller_factory: Controller, ctl_broker: Broker
) -> None:
    """controller.md 10 (SyncStateSet reporting): 1. b1 master, b2 slave; 2. the HA callback
    path reports {2} (``report_sync_state_set_nowait``; the master's own id is added).
    Expected: the controller commits {1, 2} with epoch 2 and b1 adopts it; 3. b1 reports the
    empty set (shrink to itself): {1}, epoch 3; 4. b2 (a slave) reporting raises
    CONTROLLER_INVALID_MASTER without asking."""
    ctl = await controller_factory()
    b1 = await ctl_broker(ctl, "b1")
    b2 = await ctl_broker(ctl, "b2")
    assert b1.replicas is not None
    assert b2.replicas is not None
    rm = b1.replicas
    rm.report_sync_state_set_nowait(frozenset({2}))
    await wait_until(lambda: rm.statistics().sync_state_set == {1, 2}, 3)
    assert rm.statistics().sync_state_set_epoch == 2
    assert ctl.manager.sync_state_set_info_table["broker-a"].sync_state_set == {1, 2}
    committed = await rm.alter_sync_state_set(set())
    assert (committed.sync_state_set, committed.sync_state_set_epoch) == ({1}, 3)
    assert (rm.statistics().sync_state_set, rm.statistics().sync_state_set_epoch) == ({1}, 3)
    with pytest.raises(RemoteError) as refused:
        await b2.replicas.alter_sync_state_set({1})
    assert refused.value.code == ResponseCode.CONTROLLER_INVALID_MASTER


async def test_b08_local_epoch_ahead_of_controller_stays_fenced(
    controller_factory: Controller, ctl_broker: Broker, namesrv: NamesrvService, tmp_path: Path
) -> None:
    """B-08: 1. the broker's epoch file holds epoch 7 but the controller has never seen the
    broker-set; 2. the broker starts and the controller elects it with master epoch 1.
    Expected: the broker refuses the stale epoch (logged with the file, both epochs and the
    recovery steps) and stays fenced: no role, not in the NameServer, sends refused, the epoch
    file unchanged."""
    ctl = await controller_factory()
    root = tmp_path / "b1"
    root.mkdir()
    epochs = EpochFileCache(root / "epochFileCheckpoint")
    await epochs.init_from_entries([EpochEntry(epoch=7, start_offset=0)])
    before = (root / "epochFileCheckpoint").read_bytes()
    broker = await ctl_broker(ctl, "b1")
    assert broker.replicas is not None
    assert broker.replicas.broker_controller_id == 1
    assert not broker.replicas.role_known
    assert ctl.manager.sync_state_set_info_table["broker-a"].master_epoch == 1
    assert await _send(broker.address) != ResponseCode.SUCCESS
    assert _routes(namesrv) == {}
    assert (root / "epochFileCheckpoint").read_bytes() == before


async def test_autoswitch_ha_min_in_sync_replicas_then_slave_joins_sync_state_set(
    controller_factory: Controller, ctl_broker: Broker
) -> None:
    """Issue 7 section 3 (ha.md 3.8), in-process brokers with AutoSwitch HA:
    1. Start a controller and b1 with minInSyncReplicas=2, allAckInSyncStateSet=true.
    Expected: b1 is master; a send is refused with "in-sync replicas not enough" (SyncStateSet
    {1}) and nothing is stored.
    2. Start b2. Expected: it follows b1's HA address from the NameServer registration, the
    controller commits SyncStateSet {1, 2} and b1 adopts it.
    3. Send again. Expected: SEND_OK, and b2's commit log ends where b1's does."""
    ctl = await controller_factory()
    ha = {"minInSyncReplicas": 2, "allAckInSyncStateSet": True, "haSendHeartbeatInterval": 200}
    b1 = await ctl_broker(ctl, "b1", ha=ha)
    assert b1.replicas is not None
    assert b1.replicas.is_master
    client = JavaLikeClient()
    try:
        refused = await client.send(b1.address, "CtlTopic", b"x")
        assert (refused.code, refused.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "in-sync replicas not enough",
        )
        assert b1.store.store_offsets().max_phy_offset == 0
        b2 = await ctl_broker(ctl, "b2", ha=ha)
        replicas = b1.replicas
        await wait_until(lambda: replicas.statistics().sync_state_set == {1, 2}, 10)
        ok = await client.send(b1.address, "CtlTopic", b"x")
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        end = b1.store.store_offsets().max_phy_offset
        assert end > 0
        assert b2.store.store_offsets().max_phy_offset == end
    finally:
        await client.close()


async def test_b07_epoch_and_identity_files_follow_their_path_keys(
    controller_factory: Controller, ctl_broker: Broker, tmp_path: Path
) -> None:
    """B-07. 1. Start a controller-mode broker with storePathEpochFile and
    storePathBrokerIdentity pointing outside the store root.
    Expected: the identity and the epoch file are written at those paths (their ``.bak``
    handling is the atomic-file tests'), and nothing at the defaults under the store root (R-01
    checks the defaults)."""
    ctl = await controller_factory()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    epoch_file = elsewhere / "epochs"
    identity = elsewhere / "identity"
    broker = await ctl_broker(ctl, "b7", store={
        "storePathEpochFile": str(epoch_file), "storePathBrokerIdentity": str(identity),
    })  # fmt: skip
    assert broker.replicas is not None
    await wait_until(
        lambda: broker.replicas is not None and broker.replicas.statistics().is_master, 5
    )
    assert identity.read_text() == "DefaultCluster#broker-a#1"
    assert epoch_file.read_text().endswith("1-0\n")
    assert not (tmp_path / "b7" / "brokerIdentity").exists()
    assert not (tmp_path / "b7" / "epochFileCheckpoint").exists()
