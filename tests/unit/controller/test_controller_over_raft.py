"""The controller state machine replicated by the Raft core, over the in-memory network:
the pure-state part of scenarios C-12 (leader change preserves state) and C-16 (no majority,
no change), and C-18's "replaying the log from an older snapshot yields the same state"."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from rocketpy.controller.state.events import Event, decode_events, encode_events
from rocketpy.controller.state.replicas_info import ReplicasInfoManager
from rocketpy.controller.state.snapshot import encode_state
from rocketpy.dledger.core import NotLeader
from rocketpy.remoting.protocol.bodies.controller import SyncStateSet
from rocketpy.remoting.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    ElectMasterRequestHeader,
    GetReplicaInfoRequestHeader,
)
from tests.helpers.controller_state import BROKER, CLUSTER, alive, code
from tests.helpers.raft_net import Cluster


def _state(c: Cluster, node_id: str) -> ReplicasInfoManager:
    """The controller state of a node: its applied entries, decoded and applied in order."""
    m = ReplicasInfoManager()
    for payload in c.applied(node_id):
        m.apply_all(decode_events(payload))
    return m


def _submit(c: Cluster, result_events: Sequence[Event]) -> None:
    leader = c.leader()
    assert leader is not None
    c.core(leader).propose(encode_events(result_events))
    c.flush(leader)
    c.run(4)


def _build_g3(c: Cluster) -> None:
    """Register broker-a with ids 1, 2, 3, elect 1, report SyncStateSet {1,2,3} -- each
    request decided on the leader's state, its events committed through Raft."""
    live = alive(1, 2, 3)
    for i in (1, 2, 3):
        m = _state(c, c.leader() or "")
        req = ApplyBrokerIdRequestHeader(
            cluster_name=CLUSTER,
            broker_name=BROKER,
            applied_broker_id=i,
            register_check_code=code(i),
        )
        _submit(c, m.apply_broker_id(req).events)
    m = _state(c, c.leader() or "")
    _submit(
        c,
        m.elect_master(ElectMasterRequestHeader.of_broker_trigger(CLUSTER, BROKER, 1), live).events,
    )
    m = _state(c, c.leader() or "")
    alter = AlterSyncStateSetRequestHeader(broker_name=BROKER, master_broker_id=1, master_epoch=1)
    body = SyncStateSet(sync_state_set=frozenset({1, 2, 3}), sync_state_set_epoch=1)
    _submit(c, m.alter_sync_state_set(alter, body, live).events)


def test_c12_leader_change_preserves_state() -> None:
    """C-12 (pure part): 1. CTRL3 commits G3 (master 1, SyncStateSet {1,2,3}); 2. the
    controller leader crashes. Expected: a new leader is elected; once it has applied its own
    term's NOOP its state reports master 1, masterEpoch 1, SyncStateSet {1,2,3} (epoch 2),
    identical to every other node's; writes to followers raise NotLeader."""
    c = Cluster(seed=12)
    old = c.elect()
    _build_g3(c)
    c.crash(old)
    new = c.elect()
    assert new != old
    c.run(4)
    core = c.core(new)
    assert core.status().applied_index >= core.status().term_start_index
    m = _state(c, new)
    r = m.get_replica_info(GetReplicaInfoRequestHeader(broker_name=BROKER))
    assert r.response is not None
    assert (r.response.master_broker_id, r.response.master_epoch) == (1, 1)
    sync = m.sync_state_set_info_table[BROKER]
    assert (sync.sync_state_set, sync.sync_state_set_epoch) == (frozenset({1, 2, 3}), 2)
    survivors = [i for i in c.ids if i != old]
    assert len({encode_state(_state(c, i)) for i in survivors}) == 1
    follower = next(i for i in survivors if i != new)
    with pytest.raises(NotLeader) as info:
        c.core(follower).propose(b"x")
    assert info.value.leader_id == new


def test_c16_no_majority_no_state_change() -> None:
    """C-16 (pure part): 1. CTRL3 with G3; 2. two controllers stop; 3. the survivor cannot
    commit anything (it is or becomes a non-leader, or its proposals never commit).
    Expected: its applied state stays master 1 / epoch 1; 4. the two return -> the state is
    unchanged on all three."""
    c = Cluster(seed=16)
    c.elect()
    _build_g3(c)
    before = encode_state(_state(c, c.ids[0]))
    survivor, *down = c.ids
    for d in down:
        c.crash(d)
    try:
        c.core(survivor).propose(encode_events([]))
        c.flush(survivor)
    except NotLeader:
        pass
    c.run(30)
    assert encode_state(_state(c, survivor)) == before
    for d in down:
        c.restart(d)
    c.elect()
    c.run(5)
    states = {encode_state(_state(c, i)) for i in c.ids}
    assert states == {before}


def test_c18_restart_from_snapshot_replays_to_same_state() -> None:
    """C-18 (pure part): 1. G3 committed; 2. n1 snapshots its applied entries and compacts;
    3. n1 crashes and restarts from the snapshot. Expected: same controller state as n0."""
    c = Cluster(seed=18)
    c.elect()
    _build_g3(c)
    c.compact("n1", keep=2)
    c.crash("n1")
    c.restart("n1")
    c.elect()
    c.run(5)
    assert encode_state(_state(c, "n1")) == encode_state(_state(c, "n0"))
