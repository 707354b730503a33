"""Controller request processors over TCP: leader gating, validation order, response codes,
malformed requests (controller.md sections 3-4, scenarios C-01..C-04, C-10, C-19, P-05)."""

from __future__ import annotations

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.bodies.controller import (
    decode_broker_replicas_info,
    decode_sync_state_set,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from tests.helpers.controller_client import FakeBroker
from tests.integration.controller.conftest import Solo

pytestmark = pytest.mark.integration


async def _lead(solo: Solo) -> None:
    solo.node.set_leader(True)
    await wait_until(lambda: solo.node.entries != [], 2)  # the start-of-term barrier


async def test_controller_refuses_state_requests_until_leader(
    solo: Solo, client: RemotingClient
) -> None:
    """1. A node that is not the leader gets 1012, 1013 and 1004.
    Expected: each answered CONTROLLER_NOT_LEADER "The controller is not in leader state", while
    1005 (metadata) is answered SUCCESS with isLeader=false. 2. The node becomes leader.
    Expected: it commits a barrier entry first, then 1012 answers SUCCESS."""
    b1 = FakeBroker(client, 1, "127.0.0.1:10911")
    for resp in (await b1.next_id(solo.addr), await b1.apply_id(solo.addr)):
        assert resp.code == ResponseCode.CONTROLLER_NOT_LEADER
        assert resp.remark == "The controller is not in leader state"
    meta = await b1.call(solo.addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
    assert (meta.code, meta.ext("isLeader")) == (ResponseCode.SUCCESS, "false")
    await _lead(solo)
    got = await b1.next_id(solo.addr)
    assert (got.code, got.ext("nextBrokerId")) == (ResponseCode.SUCCESS, "1")


async def test_c01_first_registration_and_first_master(solo: Solo, client: RemotingClient) -> None:
    """C-01: 1. brokers 1, 2, 3 each get the next id, apply it, register and heart-beat;
    2. broker 1 then broker 2 ask to be elected; 3. the master reports SyncStateSet {1,2,3}.
    Expected: ids 1, 2, 3; broker 1 wins (masterEpoch 1, syncStateSetEpoch 1, on_elected
    called once); broker 2 gets 2011 naming master 1; the alter answers epoch 2 and
    GET_SYNC_STATE_DATA shows three alive in-sync replicas."""
    await _lead(solo)
    brokers = [FakeBroker(client, i, f"127.0.0.1:1091{i}") for i in (1, 2, 3)]
    for b in brokers:
        await b.join(solo.addr)
    await wait_until(lambda: len(solo.heartbeats.records()) == 3, 2)
    won = await brokers[0].elect_me(solo.addr)
    assert won.code == ResponseCode.SUCCESS, won.remark
    assert (won.ext("masterBrokerId"), won.ext("masterEpoch")) == ("1", "1")
    assert won.ext("syncStateSetEpoch") == "1"
    assert won.ext("masterAddress") == "127.0.0.1:10911"
    lost = await brokers[1].elect_me(solo.addr)
    assert lost.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    assert (lost.ext("masterBrokerId"), lost.ext("masterEpoch")) == ("1", "1")
    assert [h.master_broker_id for h in solo.elected] == [1]
    alter = await brokers[0].alter(solo.addr, {1, 2, 3}, master_epoch=1, set_epoch=1)
    assert (alter.code, alter.ext("newSyncStateSetEpoch")) == (ResponseCode.SUCCESS, "2")
    assert decode_sync_state_set(alter.body or b"").sync_state_set == {1, 2, 3}
    data = await brokers[0].sync_state_data(solo.addr)
    info = decode_broker_replicas_info(data.body or b"").replicas_info_table["broker-a"]
    assert info.sync_state_set_epoch == 2
    assert [r.alive for r in info.in_sync_replicas] == [True, True, True]
    assert info.not_in_sync_replicas == ()


async def test_c03_c04_apply_and_register_validation(solo: Solo, client: RemotingClient) -> None:
    """C-03/C-04: 1. apply id 5 for an unknown broker-set -> 2014 naming the set;
    2. register an id never applied -> 2010; 3. broker 1 joins, then re-registers from a new
    port. Expected: SUCCESS and GET_REPLICA_INFO... the replica table holds the new address."""
    await _lead(solo)
    b5 = FakeBroker(client, 5, "127.0.0.1:10915")
    bad = await b5.apply_id(solo.addr)
    assert bad.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    assert "broker-a" in (bad.remark or "")
    unknown = await b5.register(solo.addr)
    assert unknown.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    b1 = FakeBroker(client, 1, "127.0.0.1:10911")
    await b1.join(solo.addr)
    moved = FakeBroker(client, 1, "127.0.0.1:20911")
    assert (await moved.register(solo.addr)).code == ResponseCode.SUCCESS
    assert solo.manager.replica_info_table["broker-a"].broker_address(1) == "127.0.0.1:20911"


async def test_c10_alter_sync_state_set_order(solo: Solo, client: RemotingClient) -> None:
    """C-10 over the wire: master 1 (epoch 1), SyncStateSet {1} epoch 1. Requests: same set ->
    2013; as broker 2 -> 2002; masterEpoch 0 -> 2000; set epoch 0 -> 2001; unknown id 7 ->
    2003; valid {1,2} -> SUCCESS epoch 2. Rejected requests commit nothing."""
    await _lead(solo)
    b1, b2 = (FakeBroker(client, i, f"127.0.0.1:1091{i}") for i in (1, 2))
    await b1.join(solo.addr)
    await b2.join(solo.addr)
    await wait_until(lambda: len(solo.heartbeats.records()) == 2, 2)
    assert (await b1.elect_me(solo.addr)).code == ResponseCode.SUCCESS
    committed = len(solo.node.entries)
    cases = [
        (b1, {1}, 1, 1, ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        (b2, {1, 2}, 1, 1, ResponseCode.CONTROLLER_INVALID_MASTER),
        (b1, {1, 2}, 0, 1, ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH),
        (b1, {1, 2}, 1, 0, ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        (b1, {1, 7}, 1, 1, ResponseCode.CONTROLLER_INVALID_REPLICAS),
    ]
    for broker, new_set, master_epoch, set_epoch, expected in cases:
        resp = await broker.alter(solo.addr, new_set, master_epoch, set_epoch)
        assert resp.code == expected, (new_set, master_epoch, set_epoch, resp.remark)
    assert len(solo.node.entries) == committed
    ok = await b1.alter(solo.addr, {1, 2}, 1, 1)
    assert (ok.code, ok.ext("newSyncStateSetEpoch")) == (ResponseCode.SUCCESS, "2")


async def test_controller_malformed_requests_get_clear_errors(
    solo: Solo, client: RemotingClient
) -> None:
    """P-05: 1. 1013 without registerCheckCode; 2. 1012 with a non-numeric... field; 3. 1006
    with no body; 4. 1001 with no body; 5. a non-oneway heartbeat without brokerId.
    Expected: SYSTEM_ERROR naming the field (1, 4), SYSTEM_ERROR "not set any response code"
    (3), 2005 "Heart beat with empty brokerId" (5); nothing committed; the server keeps serving."""
    await _lead(solo)
    b = FakeBroker(client, 1, "127.0.0.1:10911")
    committed = len(solo.node.entries)
    missing = await b.call(
        solo.addr,
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        ext={"clusterName": "c", "brokerName": "b", "appliedBrokerId": "1"},
    )
    assert missing.code == ResponseCode.SYSTEM_ERROR
    assert "registerCheckCode" in (missing.remark or "")
    bad_number = await b.call(
        solo.addr,
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        ext={
            "clusterName": "c",
            "brokerName": "b",
            "appliedBrokerId": "one",
            "registerCheckCode": "x;1",
        },
    )
    assert bad_number.code == ResponseCode.SYSTEM_ERROR
    assert "appliedBrokerId" in (bad_number.remark or "")
    empty = await b.call(solo.addr, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA)
    assert (empty.code, empty.remark) == (ResponseCode.SYSTEM_ERROR, "not set any response code")
    no_body = await b.call(
        solo.addr,
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        ext={"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "1"},
    )
    assert no_body.code == ResponseCode.SYSTEM_ERROR
    hb = RemotingCommand.request(
        RequestCode.BROKER_HEARTBEAT,
        {"clusterName": "c", "brokerName": "b", "brokerAddr": "127.0.0.1:1"},
    )
    resp = await client.invoke(solo.addr, hb, 5)
    assert (resp.code, resp.remark) == (
        ResponseCode.CONTROLLER_INVALID_REQUEST,
        "Heart beat with empty brokerId",
    )
    assert len(solo.node.entries) == committed
    assert (await b.next_id(solo.addr)).code == ResponseCode.SUCCESS


async def test_c19_controller_config_black_list(solo: Solo, client: RemotingClient) -> None:
    """C-19: 1. update a harmless key (notifyBrokerRoleChanged=false); 2. update configStorePath;
    3. update configBlackList. Expected: 1 SUCCESS and GET_CONTROLLER_CONFIG shows it; 2 and 3
    NO_PERMISSION "Can not update config in black list." and the config is unchanged."""
    b = FakeBroker(client, 1, "127.0.0.1:10911")
    ok = await b.call(
        solo.addr, RequestCode.UPDATE_CONTROLLER_CONFIG, body=b"notifyBrokerRoleChanged=false\n"
    )
    assert ok.code == ResponseCode.SUCCESS
    got = await b.call(solo.addr, RequestCode.GET_CONTROLLER_CONFIG)
    assert "notifyBrokerRoleChanged=false" in (got.body or b"").decode().splitlines()
    for body in (b"configStorePath=/tmp/evil\n", b"configBlackList=\n"):
        refused = await b.call(solo.addr, RequestCode.UPDATE_CONTROLLER_CONFIG, body=body)
        assert (refused.code, refused.remark) == (
            ResponseCode.NO_PERMISSION,
            "Can not update config in black list.",
        )
    assert solo.config.config_black_list == "configBlackList;configStorePath"
