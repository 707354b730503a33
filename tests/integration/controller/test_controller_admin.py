"""mqadmin's controller subcommands against a live controller port: upstream flags and output
(scenarios O-01, O-02, C-11, C-17)."""

from __future__ import annotations

import pytest

from rocketpy.cli.admin import build_parser
from rocketpy.cli.admin_controller import CONTROLLER_COMMANDS
from rocketpy.client.controller_admin import ControllerAdminClient
from rocketpy.common.aio import wait_until
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.remoting.transport.client import RemotingClient
from tests.helpers.controller_client import FakeBroker
from tests.integration.controller.conftest import Solo

pytestmark = pytest.mark.integration


async def _mqadmin(*argv: str) -> int:
    args = build_parser().parse_args(list(argv))
    admin = ControllerAdminClient()
    try:
        return await CONTROLLER_COMMANDS[args.command].run(args, admin)
    finally:
        await admin.close()


async def test_mqadmin_controller_views_and_elect(
    solo: Solo, client: RemotingClient, capsys: pytest.CaptureFixture[str]
) -> None:
    """1. Brokers 1 and 2 join; 1 is elected; the set becomes {1,2}. 2. getControllerMetaData,
    getSyncStateSet -b, electMaster -b 2. Expected: upstream's '#Key\\tvalue' lines: group,
    leader id/address and peers; master 1, epochs, 2 in-sync replicas printed as
    ReplicaIdentity{...}; the admin election makes 2 master with masterEpoch 2 and lists both
    members; electing the current master again fails with 2011."""
    solo.node.set_leader(True)
    await wait_until(lambda: solo.node.entries != [], 2)
    b1, b2 = (FakeBroker(client, i, f"127.0.0.1:1091{i}") for i in (1, 2))
    await b1.join(solo.addr)
    await b2.join(solo.addr)
    await wait_until(lambda: len(solo.heartbeats.records()) == 2, 2)
    assert (await b1.elect_me(solo.addr)).code == ResponseCode.SUCCESS
    assert (await b1.alter(solo.addr, {1, 2}, 1, 1)).code == ResponseCode.SUCCESS
    capsys.readouterr()
    assert await _mqadmin("getControllerMetaData", "-a", solo.addr) == 0
    meta = capsys.readouterr().out
    assert "#ControllerGroup\tg" in meta
    assert "#ControllerLeaderId\tn0" in meta
    assert f"#ControllerLeaderAddress\t{solo.addr}" in meta
    assert f"#Peer:\tn0:{solo.addr}" in meta
    assert await _mqadmin("getSyncStateSet", "-a", solo.addr, "-b", "broker-a") == 0
    sync = capsys.readouterr().out
    for line in (
        "#MasterBrokerId\t1",
        "#MasterEpoch\t1",
        "#SyncStateSetEpoch\t2",
        "#SyncStateSetNums\t2",
        "#MasterAddr\t127.0.0.1:10911",
    ):
        assert line in sync
    assert (
        "InSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=2, "
        "brokerAddress='127.0.0.1:10912', alive=true}" in sync
    )
    argv = ("electMaster", "-a", solo.addr, "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2")
    assert await _mqadmin(*argv) == 0
    elect = capsys.readouterr().out
    assert "#BrokerMasterAddr\t127.0.0.1:10912" in elect
    assert "#MasterEpoch\t2" in elect
    assert "\t#Broker\t1\t127.0.0.1:10911" in elect
    with pytest.raises(RemoteError) as info:
        await _mqadmin(*argv)
    assert info.value.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST


async def test_c17_mqadmin_clean_broker_metadata(
    solo: Solo, client: RemotingClient, capsys: pytest.CaptureFixture[str]
) -> None:
    """C-17: 1. broker 1 joins and is master. 2. cleanBrokerMetadata without -l and without -c
    -> refused before sending; with -c while the master lives -> 2009 "still alive". 3. with -l
    -> success; the broker-set is gone and the next id is 1 again."""
    solo.node.set_leader(True)
    await wait_until(lambda: solo.node.entries != [], 2)
    b1 = FakeBroker(client, 1, "127.0.0.1:10911")
    await b1.join(solo.addr)
    await wait_until(lambda: len(solo.heartbeats.records()) == 1, 2)
    assert (await b1.elect_me(solo.addr)).code == ResponseCode.SUCCESS
    with pytest.raises(ValueError, match="clusterName option can not be empty"):
        await _mqadmin("cleanBrokerMetadata", "-a", solo.addr, "-bn", "broker-a")
    with pytest.raises(RemoteError) as info:
        await _mqadmin(
            "cleanBrokerMetadata", "-a", solo.addr, "-bn", "broker-a", "-c", "DefaultCluster"
        )
    assert info.value.code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert "Broker broker-a is still alive, clean up failure" in info.value.remark
    capsys.readouterr()
    assert await _mqadmin("cleanBrokerMetadata", "-a", solo.addr, "-bn", "broker-a", "-l") == 0
    assert "clear broker broker-a metadata from controller success!" in capsys.readouterr().out
    assert (await b1.next_id(solo.addr)).ext("nextBrokerId") == "1"


async def test_mqadmin_controller_config(solo: Solo, capsys: pytest.CaptureFixture[str]) -> None:
    """updateControllerConfig -k enableElectUncleanMaster -v true, then getControllerConfig.
    Expected: upstream's success line, then '=====addr=====' and the key padded to 50 columns
    with the new value."""
    argv = (
        "updateControllerConfig",
        "-a",
        solo.addr,
        "-k",
        "enableElectUncleanMaster",
        "-v",
        "true",
    )
    assert await _mqadmin(*argv) == 0
    assert f"update controller config success![{solo.addr}]" in capsys.readouterr().out
    assert await _mqadmin("getControllerConfig", "-a", solo.addr) == 0
    out = capsys.readouterr().out
    assert f"============{solo.addr}============" in out
    assert f"{'enableElectUncleanMaster':<50}=  true" in out
