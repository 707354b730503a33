"""ReplicasInfoManager: every request in every validation branch with its exact code
(codes.md 4.1, 5.1.1+ numbering), decide-never-mutates, and the pure-state scenarios of
acceptance-scenarios.md section C."""

from __future__ import annotations

import pytest

from rocketpy.common.codes import ResponseCode
from rocketpy.controller.state.elect_policy import NOBODY_ALIVE, BrokerLiveness
from rocketpy.controller.state.events import (
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    UpdateBrokerAddressEvent,
)
from rocketpy.controller.state.replicas_info import ControllerResult, ReplicasInfoManager
from rocketpy.controller.state.snapshot import encode_state
from rocketpy.controller.state.sync_state import SyncStateInfo
from rocketpy.remoting.protocol.bodies.controller import (
    SyncStateSet,
    decode_broker_replicas_info,
    decode_elect_master_body,
    decode_sync_state_set,
)
from rocketpy.remoting.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
)
from tests.helpers.controller_state import (
    BROKER,
    CLUSTER,
    addr,
    alive,
    code,
    commit,
    decide,
    group,
)


def _next_id(m: ReplicasInfoManager) -> int | None:
    r = decide(
        m,
        lambda: m.get_next_broker_id(
            GetNextBrokerIdRequestHeader(cluster_name=CLUSTER, broker_name=BROKER)
        ),
    )
    assert r.code == ResponseCode.SUCCESS
    assert r.response is not None
    return r.response.next_broker_id


def _apply_id(m: ReplicasInfoManager, broker_id: int, check: str) -> int:
    req = ApplyBrokerIdRequestHeader(
        cluster_name=CLUSTER,
        broker_name=BROKER,
        applied_broker_id=broker_id,
        register_check_code=check,
    )
    return commit(m, lambda: m.apply_broker_id(req)).code


def _register(
    m: ReplicasInfoManager, broker_id: int, address: str, liveness: BrokerLiveness = NOBODY_ALIVE
) -> ControllerResult[RegisterBrokerToControllerResponseHeader]:
    req = RegisterBrokerToControllerRequestHeader(
        cluster_name=CLUSTER, broker_name=BROKER, broker_id=broker_id, broker_address=address
    )
    return commit(m, lambda: m.register_broker(req, liveness))


def _elect(
    m: ReplicasInfoManager,
    header: ElectMasterRequestHeader,
    liveness: BrokerLiveness = NOBODY_ALIVE,
) -> ControllerResult[ElectMasterResponseHeader]:
    return commit(m, lambda: m.elect_master(header, liveness))


def _alter(
    m: ReplicasInfoManager,
    master: int,
    master_epoch: int,
    new: set[int],
    epoch: int,
    *,
    liveness: BrokerLiveness,
) -> ControllerResult[AlterSyncStateSetResponseHeader]:
    req = AlterSyncStateSetRequestHeader(
        broker_name=BROKER, master_broker_id=master, master_epoch=master_epoch
    )
    body = SyncStateSet(sync_state_set=frozenset(new), sync_state_set_epoch=epoch)
    return commit(m, lambda: m.alter_sync_state_set(req, body, liveness))


def _info(m: ReplicasInfoManager) -> SyncStateInfo:
    return m.sync_state_set_info_table[BROKER]


# -- CONTROLLER_GET_NEXT_BROKER_ID / CONTROLLER_APPLY_BROKER_ID --------------------------------


def test_c01_first_registration_and_first_master() -> None:
    """C-01: 1. three brokers each get-next-id, apply, register, elect themselves (1 first);
    2. the master reports SyncStateSet {1,2,3}. Expected: ids 1, 2, 3; broker 1 master with
    masterEpoch 1 / syncStateSetEpoch 1; 2 and 3 get 2011 with the master's id, address and
    epochs; after the report syncStateSetEpoch 2 with three in-sync, zero not-in-sync."""
    m = ReplicasInfoManager()
    for expected in (1, 2, 3):
        assert _next_id(m) == expected
        assert _apply_id(m, expected, code(expected)) == ResponseCode.SUCCESS
        assert _register(m, expected, addr(expected)).code == ResponseCode.SUCCESS
    live = alive(1, 2, 3)
    first = _elect(m, ElectMasterRequestHeader.of_broker_trigger(CLUSTER, BROKER, 1), live)
    assert first.code == ResponseCode.SUCCESS
    assert first.response is not None
    assert (
        first.response.master_broker_id,
        first.response.master_epoch,
        first.response.sync_state_set_epoch,
    ) == (1, 1, 1)
    assert first.body is not None
    body = decode_elect_master_body(first.body)
    assert body.sync_state_set == {1}
    assert body.broker_member_group is not None
    assert dict(body.broker_member_group.broker_addrs) == {1: addr(1), 2: addr(2), 3: addr(3)}
    for other in (2, 3):
        r = _elect(m, ElectMasterRequestHeader.of_broker_trigger(CLUSTER, BROKER, other), live)
        assert r.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
        assert r.response is not None
        assert (
            r.response.master_broker_id,
            r.response.master_address,
            r.response.master_epoch,
            r.response.sync_state_set_epoch,
        ) == (1, addr(1), 1, 1)
        assert r.events == ()
    assert _alter(m, 1, 1, {1, 2, 3}, 1, liveness=live).code == ResponseCode.SUCCESS
    data = decide(m, lambda: m.get_sync_state_data([BROKER], live))
    assert data.body is not None
    info = decode_broker_replicas_info(data.body).replicas_info_table[BROKER]
    assert info.sync_state_set_epoch == 2
    assert (len(info.in_sync_replicas), len(info.not_in_sync_replicas)) == (3, 0)


def test_c02_broker_id_race_and_idempotent_retry() -> None:
    """C-02: 1. broker-set has id 1; 2. two brokers both apply for 2 with different codes;
    3. the winner retries with the same code. Expected: first SUCCESS, second 2014; the loser
    asks again and gets 3; the retry succeeds without changing the state."""
    m = group((1,))
    assert _next_id(m) == 2
    assert _apply_id(m, 2, code(2, 1)) == ResponseCode.SUCCESS
    assert _apply_id(m, 2, code(9, 2)) == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    assert _next_id(m) == 3
    before = encode_state(m)
    assert _apply_id(m, 2, code(2, 1)) == ResponseCode.SUCCESS
    assert encode_state(m) == before
    assert m.replica_info_table[BROKER].broker_address(2) == addr(2)


def test_c02_apply_remark_names_id_and_set() -> None:
    """C-02: the 2014 remark is upstream's "Fail to apply brokerId: 2 in broker-set: broker-a"."""
    m = group((1, 2))
    req = ApplyBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=BROKER, applied_broker_id=2, register_check_code="x;1"
    )
    r = decide(m, lambda: m.apply_broker_id(req))
    assert (r.code, r.remark) == (
        ResponseCode.CONTROLLER_BROKER_ID_INVALID,
        "Fail to apply brokerId: 2 in broker-set: broker-a",
    )


def test_c03_first_id_of_unknown_set_must_be_1() -> None:
    """C-03: apply id 5 for an unknown broker-set. Expected: 2014 naming the set; no state."""
    m = ReplicasInfoManager()
    req = ApplyBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=BROKER, applied_broker_id=5, register_check_code=code(5)
    )
    r = commit(m, lambda: m.apply_broker_id(req))
    assert r.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    assert (
        r.remark == "Broker-set: broker-a hasn't been registered in controller, "
        "but broker try to apply brokerId: 5"
    )
    assert not m.replica_info_table


def test_apply_any_absent_id_advances_counter_by_one() -> None:
    """controller.md 4.2 note: any absent id is accepted (7), and nextAssignBrokerId only
    advances by one (2 -> 3)."""
    m = group((1,))
    assert _apply_id(m, 7, code(7)) == ResponseCode.SUCCESS
    assert _next_id(m) == 3


# -- CONTROLLER_REGISTER_BROKER ----------------------------------------------------------------


def test_c04_register_validation_and_address_change() -> None:
    """C-04: A. register id 9 never applied -> 2010 naming it; unknown set -> 2010.
    B. master 1 (alive) re-registers from a new port. Expected B: UpdateBrokerAddressEvent,
    id and role unchanged, the response names master 1 at its *old* address (decided before
    the event), and replica info afterwards shows the new address."""
    empty = ReplicasInfoManager()
    r = _register(empty, 1, addr(1))
    assert (r.code, r.remark) == (
        ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        "Broker-set: broker-a hasn't been registered in controller",
    )
    m = group(master=1, sync=frozenset({1, 2, 3}))
    r = _register(m, 9, addr(9))
    assert (r.code, r.remark) == (
        ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        "BrokerId: 9 hasn't been registered in broker-set: broker-a",
    )
    r = _register(m, 1, "10.0.0.1:20911", alive(1, 2, 3))
    assert r.code == ResponseCode.SUCCESS
    assert r.events == (
        UpdateBrokerAddressEvent(
            cluster_name=CLUSTER, broker_name=BROKER, broker_address="10.0.0.1:20911", broker_id=1
        ),
    )
    assert r.response is not None
    assert (
        r.response.master_broker_id,
        r.response.master_epoch,
        r.response.sync_state_set_epoch,
    ) == (1, 1, 2)
    info = decide(m, lambda: m.get_replica_info(GetReplicaInfoRequestHeader(broker_name=BROKER)))
    assert info.response is not None
    assert (info.response.master_broker_id, info.response.master_address) == (1, "10.0.0.1:20911")
    assert _info(m).master_epoch == 1


def test_register_without_live_master_omits_master_fields() -> None:
    """controller.md 4.3 step 3: master 1 is dead -> no master fields; body = SyncStateSet;
    same address -> no event."""
    m = group(master=1, sync=frozenset({1, 2}))
    r = _register(m, 2, addr(2), alive(2))
    assert r.response is not None
    assert (r.response.master_broker_id, r.response.master_address, r.response.cluster_name) == (
        None,
        None,
        CLUSTER,
    )
    assert r.events == ()
    assert r.body == b'{"syncStateSet":[1,2],"syncStateSetEpoch":2}'


# -- CONTROLLER_ELECT_MASTER -------------------------------------------------------------------


def test_elect_unknown_set_needs_registration() -> None:
    """controller.md 4.4 step 1: 2010 "Broker hasn't been registered"."""
    m = ReplicasInfoManager()
    r = _elect(m, ElectMasterRequestHeader.of_broker_trigger(CLUSTER, BROKER, 1))
    assert (r.code, r.remark) == (
        ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        "Broker hasn't been registered",
    )


def test_first_election_takes_the_caller_without_liveness_check() -> None:
    """controller.md 4.4 step 2: masterEpoch 0 -> the caller wins even if nobody is alive."""
    m = group()
    r = _elect(m, ElectMasterRequestHeader.of_broker_trigger(CLUSTER, BROKER, 2))
    assert (r.code, _info(m).master_broker_id, _info(m).sync_state_set) == (
        ResponseCode.SUCCESS,
        2,
        frozenset({2}),
    )


def test_first_controller_trigger_falls_through_to_the_policy() -> None:
    """controller.md 4.4 step 2: a controller trigger (-1) on a fresh set uses the policy; with
    an empty SyncStateSet nobody qualifies -> 2004 and ElectMasterEvent(false)."""
    m = group()
    r = _elect(m, ElectMasterRequestHeader.of_controller_trigger(BROKER), alive(1, 2, 3))
    assert r.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert r.events == (ElectMasterEvent(new_master_elected=False, broker_name=BROKER),)


@pytest.mark.parametrize(
    ("facts", "winner"),
    [
        ({"b2": (1, 0, 2**31 - 1), "b3": (0, 0, 2**31 - 1)}, 2),  # (a) higher epoch
        ({"b2": (1, 100, 2**31 - 1), "b3": (1, 200, 2**31 - 1)}, 3),  # (b) larger offset
        ({"b2": (1, 100, 2), "b3": (1, 100, 1)}, 3),  # (c) smaller priority value
        ({"b2": (1, 100, 1), "b3": (1, 100, 2**31 - 1)}, 2),  # unset priority = least
        ({"b2": (1, 2**31 + 5, 9), "b3": (1, 3, 9)}, 2),  # offsets 2^31 apart still ordered
        ({"b2": (1, 3, 9), "b3": (1, 2**31 + 5, 9)}, 3),
        ({"b2": (1, 7, 9), "b3": (1, 7, 9)}, 2),  # equal rank: not dropped, lowest id
    ],
)
def test_c06_election_ordering_after_master_death(
    facts: dict[str, tuple[int, int, int]], winner: int
) -> None:
    """C-06: 1. master 1 dead, SyncStateSet {1,2,3}; 2. controller-triggered election with
    heartbeat facts (epoch, maxOffset, priority). Expected: the listed winner, masterEpoch 2,
    SyncStateSet {winner}, syncStateSetEpoch 3; the dead broker never chosen."""
    m = group(master=1, sync=frozenset({1, 2, 3}))
    r = _elect(m, ElectMasterRequestHeader.of_controller_trigger(BROKER), alive(2, 3, **facts))
    assert r.code == ResponseCode.SUCCESS
    info = _info(m)
    assert (
        info.master_broker_id,
        info.master_epoch,
        info.sync_state_set,
        info.sync_state_set_epoch,
    ) == (winner, 2, frozenset({winner}), 3)


def test_c07_only_dead_master_in_sync_unclean_off() -> None:
    """C-07: 1. SyncStateSet {1}, master 1 dead, 2 and 3 alive; 2. controller trigger.
    Expected: 2004, no master, masterEpoch 2, SyncStateSet still {1}; 3. broker 2's "elect me"
    -> 2012, no event; 4. broker 1 returns and asks -> it wins with masterEpoch 3."""
    m = group(master=1)
    r = _elect(m, ElectMasterRequestHeader.of_controller_trigger(BROKER), alive(2, 3))
    assert (r.code, r.remark) == (
        ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
        "Old master has down and failed to elect a new broker master",
    )
    info = _info(m)
    assert (info.master_broker_id, info.master_epoch, info.sync_state_set) == (
        None,
        2,
        frozenset({1}),
    )
    r = _elect(m, ElectMasterRequestHeader.of_broker_trigger(CLUSTER, BROKER, 2), alive(2, 3))
    assert (r.code, r.remark, r.events) == (
        ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
        "Failed to elect a new master",
        (),
    )
    r = _elect(m, ElectMasterRequestHeader.of_broker_trigger(CLUSTER, BROKER, 1), alive(1, 2, 3))
    assert r.code == ResponseCode.SUCCESS
    assert (_info(m).master_broker_id, _info(m).master_epoch) == (1, 3)


def test_c08_unclean_election_enabled() -> None:
    """C-08: same as C-07 with enableElectUncleanMaster: an alive out-of-sync broker wins,
    preferring the higher epoch, then maxOffset; SyncStateSet = {it}, masterEpoch 2."""
    m = group(master=1, unclean=True)
    live = alive(2, 3, b2=(1, 50, 9), b3=(1, 80, 9))
    r = _elect(m, ElectMasterRequestHeader.of_controller_trigger(BROKER), live)
    assert r.code == ResponseCode.SUCCESS
    assert (_info(m).master_broker_id, _info(m).sync_state_set, _info(m).master_epoch) == (
        3,
        frozenset({3}),
        2,
    )


def test_c11_administrative_designated_election() -> None:
    """C-11: master 2 alive, SyncStateSet {1,2,3}. Expected: designate dead 1 -> 2012;
    designate 2 -> 2011; once 1 is alive, designate 1 -> SUCCESS, masterEpoch + 1."""
    m = group(master=2, sync=frozenset({1, 2, 3}))
    r = _elect(m, ElectMasterRequestHeader.of_admin_trigger(CLUSTER, BROKER, 1), alive(2, 3))
    assert r.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    r = _elect(m, ElectMasterRequestHeader.of_admin_trigger(CLUSTER, BROKER, 2), alive(2, 3))
    assert r.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    assert (
        r.remark
        == "The old master 2 is still alive, not need to elect new master for broker broker-a"
    )
    assert r.body is not None
    assert decode_elect_master_body(r.body).broker_member_group is None
    r = _elect(m, ElectMasterRequestHeader.of_admin_trigger(CLUSTER, BROKER, 1), alive(1, 2, 3))
    assert r.code == ResponseCode.SUCCESS
    assert (_info(m).master_broker_id, _info(m).master_epoch) == (1, 2)


def test_old_master_alive_is_kept() -> None:
    """controller.md 6 step 2c: a broker trigger while master 1 lives -> 2011."""
    m = group(master=1, sync=frozenset({1, 2}))
    r = _elect(m, ElectMasterRequestHeader.of_broker_trigger(CLUSTER, BROKER, 2), alive(1, 2))
    assert r.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST


# -- CONTROLLER_ALTER_SYNC_STATE_SET -----------------------------------------------------------


@pytest.mark.parametrize(
    ("master", "master_epoch", "new", "epoch", "code_", "remark"),
    [
        (
            1,
            1,
            {1, 2, 3},
            2,
            ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
        ),
        (
            2,
            1,
            {1, 2},
            2,
            ResponseCode.CONTROLLER_INVALID_MASTER,
            "Rejecting alter syncStateSet request because the current leader is:{1}, not {2}",
        ),
        (
            1,
            0,
            {1, 2},
            2,
            ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
            "Rejecting alter syncStateSet request because the current master epoch is:{1}, not {0}",
        ),
        (
            1,
            1,
            {1, 2},
            1,
            ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            "Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
            "{2}, not {1}",
        ),
        (
            1,
            1,
            {1, 7},
            2,
            ResponseCode.CONTROLLER_INVALID_REPLICAS,
            "Rejecting alter syncStateSet request because the replicas {7} don't exist",
        ),
        (
            1,
            1,
            {1, 3},
            2,
            ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
            "Rejecting alter syncStateSet request because the replicas {3} don't alive",
        ),
        (
            1,
            1,
            {2, 3},
            2,
            ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
            "Rejecting alter syncStateSet request because the replicas {3} don't alive",
        ),
        (
            1,
            1,
            {2},
            2,
            ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            "Rejecting alter syncStateSet request because the newSyncStateSet don't contains "
            "origin leader {1}",
        ),
        (1, 1, {1, 2}, 2, ResponseCode.SUCCESS, None),
    ],
)
def test_c10_alter_sync_state_set_matrix(  # noqa: PLR0917 - pytest parameters
    master: int, master_epoch: int, new: set[int], epoch: int, code_: int, remark: str | None
) -> None:
    """C-10: master 1, masterEpoch 1, SyncStateSet {1,2,3} at epoch 2, broker 3 dead.
    Expected: the listed code and remark, checked in upstream order; rejected requests change
    nothing; the valid {1,2} gives syncStateSetEpoch 3 in header, body and state."""
    m = group(master=1, sync=frozenset({1, 2, 3}))
    r = _alter(m, master, master_epoch, new, epoch, liveness=alive(1, 2))
    assert (r.code, r.remark) == (code_, remark)
    if code_ == ResponseCode.SUCCESS:
        assert r.response is not None
        assert r.response.new_sync_state_set_epoch == 3
        assert r.body is not None
        assert decode_sync_state_set(r.body) == SyncStateSet(
            sync_state_set=frozenset({1, 2}), sync_state_set_epoch=3
        )
        assert (_info(m).sync_state_set, _info(m).sync_state_set_epoch) == (frozenset({1, 2}), 3)
    else:
        assert r.events == ()
        assert (_info(m).sync_state_set, _info(m).sync_state_set_epoch) == (frozenset({1, 2, 3}), 2)


def test_alter_unknown_set() -> None:
    """controller.md 4.5 check 1: 2013 "Broker metadata is not existed"."""
    m = ReplicasInfoManager()
    r = _alter(m, 1, 1, {1}, 0, liveness=alive(1))
    assert (r.code, r.remark) == (
        ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        "Broker metadata is not existed",
    )


def test_alter_without_master_is_invalid_master() -> None:
    """Check 3 with no master: 2002 naming null."""
    m = group()
    r = _alter(m, 1, 0, {1}, 0, liveness=alive(1))
    assert (r.code, r.remark) == (
        ResponseCode.CONTROLLER_INVALID_MASTER,
        "Rejecting alter syncStateSet request because the current leader is:{null}, not {1}",
    )


# -- CONTROLLER_GET_REPLICA_INFO / CONTROLLER_GET_SYNC_STATE_DATA ------------------------------


def test_get_replica_info_known_and_unknown() -> None:
    """controller.md 4.6: known -> master id/address/epoch + SyncStateSet body; unknown -> 2008."""
    m = group(master=2, sync=frozenset({2, 3}))
    r = decide(m, lambda: m.get_replica_info(GetReplicaInfoRequestHeader(broker_name=BROKER)))
    assert r.response is not None
    assert (r.response.master_broker_id, r.response.master_address, r.response.master_epoch) == (
        2,
        addr(2),
        1,
    )
    assert r.body == b'{"syncStateSet":[2,3],"syncStateSetEpoch":2}'
    r = decide(m, lambda: m.get_replica_info(GetReplicaInfoRequestHeader(broker_name="nope")))
    assert (r.code, r.remark) == (
        ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
        "Broker metadata is not existed",
    )


def test_get_sync_state_data_splits_replicas_and_omits_unknown() -> None:
    """controller.md 4.7: in-sync vs not-in-sync with alive flags; unknown names left out."""
    m = group(master=1, sync=frozenset({1, 2}))
    r = decide(m, lambda: m.get_sync_state_data([BROKER, "ghost"], alive(1)))
    assert r.body is not None
    table = decode_broker_replicas_info(r.body).replicas_info_table
    assert list(table) == [BROKER]
    info = table[BROKER]
    assert [(x.broker_id, x.alive) for x in info.in_sync_replicas] == [(1, True), (2, False)]
    assert [(x.broker_id, x.broker_address) for x in info.not_in_sync_replicas] == [(3, addr(3))]
    assert (
        info.master_broker_id,
        info.master_address,
        info.master_epoch,
        info.sync_state_set_epoch,
    ) == (1, addr(1), 1, 2)


# -- CLEAN_BROKER_DATA -------------------------------------------------------------------------


def _clean(
    m: ReplicasInfoManager,
    ids: str | None,
    liveness: BrokerLiveness = NOBODY_ALIVE,
    *,
    living: bool = False,
    name: str = BROKER,
) -> ControllerResult[None]:
    req = CleanControllerBrokerDataRequestHeader(
        cluster_name=CLUSTER,
        broker_name=name,
        broker_controller_ids_to_clean=ids,
        is_clean_living_broker=living,
    )
    return commit(m, lambda: m.clean_broker_data(req, liveness))


def test_c17_cleaning_broker_metadata() -> None:
    """C-17: whole set with a master -> 2009 "still alive"; a listed living id -> 2009 naming it
    (two spaces); malformed ids -> 2009 with the Java exception text; dead ids -> SUCCESS and
    gone from replicas and SyncStateSet; unknown set with the living flag -> 2009 "not existed";
    after every id is cleaned the set is gone and the next registrant gets id 1."""
    m = group(master=1, sync=frozenset({1, 2, 3}))
    r = _clean(m, None)
    assert (r.code, r.remark) == (
        ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
        "Broker broker-a is still alive, clean up failure",
    )
    r = _clean(m, "1;2;3", alive(2))
    assert r.remark == "Broker [broker-a,  2] is still alive, clean up failure"
    r = _clean(m, "1;x")
    assert (
        r.remark == "Please set the option <brokerControllerIdsToClean> according to the format, "
        'exception: java.lang.NumberFormatException: For input string: "x"'
    )
    r = _clean(m, "2;3", alive(1))
    assert r.code == ResponseCode.SUCCESS
    assert r.events == (
        CleanBrokerDataEvent(broker_name=BROKER, broker_id_set_to_clean=frozenset({2, 3})),
    )
    assert m.replica_info_table[BROKER].all_brokers() == {1}
    assert _info(m).sync_state_set == {1}
    r = _clean(m, None, living=True, name="ghost")
    assert r.remark == "Broker ghost is not existed,clean broker data failure."
    assert _clean(m, "1").code == ResponseCode.SUCCESS
    assert not m.is_contains_broker(BROKER)
    assert _next_id(m) == 1


def test_clean_whole_set_without_master_and_living_flag() -> None:
    """No ids and no master -> SUCCESS, the set is removed; the living flag skips checks."""
    m = group()
    assert _clean(m, "   ").code == ResponseCode.SUCCESS
    assert not m.replica_info_table
    m = group(master=1)
    assert _clean(m, None, alive(1), living=True).code == ResponseCode.SUCCESS
    assert not m.replica_info_table


def test_clean_upstream_quirk_set_stops_existing_when_sync_set_empties() -> None:
    """controller.md 5 quirk: cleaning the only in-sync id drops the SyncStateInfo while
    replicas remain, so the set no longer "exists" (GET_REPLICA_INFO -> 2008)."""
    m = group(master=1)
    assert _clean(m, "1").code == ResponseCode.SUCCESS
    assert BROKER in m.replica_info_table
    r = decide(m, lambda: m.get_replica_info(GetReplicaInfoRequestHeader(broker_name=BROKER)))
    assert r.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST


def test_scan_need_reelect_broker_sets() -> None:
    """controller.md 7: a set whose master is dead but with a live replica needs an election;
    one with everybody dead or with a live master does not."""
    m = group(master=1, sync=frozenset({1, 2}))
    assert m.scan_need_reelect_broker_sets(alive(2)) == [BROKER]
    assert m.scan_need_reelect_broker_sets(NOBODY_ALIVE) == []
    assert m.scan_need_reelect_broker_sets(alive(1)) == []


def test_apply_ignores_events_for_unknown_sets() -> None:
    """apply is total: events naming an unknown broker-set change nothing."""
    m = ReplicasInfoManager()
    m.apply(ElectMasterEvent(new_master_elected=True, broker_name="x", new_master_broker_id=1))
    m.apply(
        UpdateBrokerAddressEvent(
            cluster_name=CLUSTER, broker_name="x", broker_address="a", broker_id=1
        )
    )
    m.apply(CleanBrokerDataEvent(broker_name="x", broker_id_set_to_clean=frozenset({1})))
    assert not m.replica_info_table


def test_apply_existing_id_is_noop() -> None:
    """ApplyBrokerIdEvent for an id already present changes nothing (idempotent retry)."""
    m = group((1,))
    m.apply(
        ApplyBrokerIdEvent(
            cluster_name=CLUSTER,
            broker_name=BROKER,
            broker_address="other",
            register_check_code="c",
            new_broker_id=1,
        )
    )
    assert m.replica_info_table[BROKER].broker_address(1) == addr(1)
    assert m.replica_info_table[BROKER].next_assign_broker_id == 2
