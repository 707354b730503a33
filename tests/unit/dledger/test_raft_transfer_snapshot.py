"""Raft section 7 (log compaction, install snapshot) and DLedger leadership transfer / preferred
leader (seed 002), over one core and over the in-memory network."""

from __future__ import annotations

import dataclasses

import msgpack
import pytest

from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.core import LeadershipTransferring, NotLeader, Role
from rocketpy.dledger.messages import (
    AppendRequest,
    AppendResponse,
    HardState,
    HeartbeatRequest,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    ResponseCode,
    Snapshot,
    SnapshotMeta,
    TakeLeadershipRequest,
)
from rocketpy.dledger.storage import LogCompacted, MemoryStorage
from tests.helpers.raft_net import FAST, Cluster, solo
from tests.helpers.raft_steps import (
    append_ok,
    beat,
    beat_ok,
    follower_of,
    make_leader,
    of_type,
    storage_with,
)

# -- section 7: snapshots and compaction -------------------------------------------------------


def test_raft_far_behind_follower_gets_install_snapshot() -> None:
    """7: 1. leader whose log is compacted up to 3 (snapshot "state@3"); 2. n1 rejects, its
    log is empty (hint 0). Expected: InstallSnapshot(meta 3@1, data) to n1 and no append to
    n1 until it answers; 3. n1 answers SUCCESS index 3 -> appends resume from 4."""
    s = solo(storage=_storage_compacted())
    make_leader(s)
    out = s.step(
        AppendResponse(
            from_id="n1",
            to_id="n0",
            term=Term(2),
            code=ResponseCode.INCONSISTENT_STATE,
            index=LogIndex(4),
            hint=LogIndex(0),
        )
    )
    out += s.step(
        AppendResponse(
            from_id="n1",
            to_id="n0",
            term=Term(2),
            code=ResponseCode.INCONSISTENT_STATE,
            index=LogIndex(3),
            hint=LogIndex(0),
        )
    )
    snaps = of_type(out, InstallSnapshotRequest)
    assert [(m.to_id, m.meta, m.data) for m in snaps] == [
        ("n1", SnapshotMeta(index=LogIndex(3), term=Term(1)), b"state@3")
    ]
    s.core.propose(b"x")
    assert not [m for m in of_type(s.drain(), AppendRequest) if m.to_id == "n1"]
    resumed = s.step(
        InstallSnapshotResponse(
            from_id="n1", to_id="n0", term=Term(2), code=ResponseCode.SUCCESS, index=LogIndex(3)
        )
    )
    first = next(m for m in of_type(resumed, AppendRequest) if m.to_id == "n1")
    assert first.prev_index == 3


def _storage_compacted() -> MemoryStorage:
    st = storage_with(1, 1, 1, 1, term=1)
    st.create_snapshot(LogIndex(3), b"state@3")
    st.compact(LogIndex(3))
    return st


def test_raft_follower_installs_snapshot_through_ready() -> None:
    """7: 1. empty follower in term 2; 2. InstallSnapshot(5@2). Expected: the Ready carries the
    snapshot (must_sync), commit and applied become 5, no committed entries are handed out, and
    SUCCESS(5) is answered; storage then starts at 6."""
    s = follower_of("n1", 2)
    s.core.step(
        InstallSnapshotRequest(
            from_id="n1",
            to_id="n0",
            term=Term(2),
            meta=SnapshotMeta(index=LogIndex(5), term=Term(2)),
            data=b"sm",
        )
    )
    rd = s.core.ready()
    assert rd.snapshot == Snapshot(meta=SnapshotMeta(index=LogIndex(5), term=Term(2)), data=b"sm")
    assert (rd.must_sync, rd.committed_entries) == (True, ())
    resp = of_type(list(rd.messages), InstallSnapshotResponse)[0]
    assert (resp.code, resp.index) == (ResponseCode.SUCCESS, 5)
    s.storage.install_snapshot(rd.snapshot)
    s.core.advance(rd)
    st = s.core.status()
    assert (st.commit_index, st.applied_index, s.storage.first_index()) == (5, 5, 6)


def test_raft_snapshot_already_covered_is_answered_with_commit() -> None:
    """7: 1. follower committed 2 with [1, 1]; 2. a stale snapshot 1@1. Expected: SUCCESS with
    index 2, nothing restored."""
    s = follower_of("n1", 1, 1, 1)
    s.step(beat("n1", "n0", 1, commit=2, rnd=2))
    out = s.step(
        InstallSnapshotRequest(
            from_id="n1",
            to_id="n0",
            term=Term(1),
            meta=SnapshotMeta(index=LogIndex(1), term=Term(1)),
            data=b"old",
        )
    )
    assert of_type(out, InstallSnapshotResponse)[0].index == 2
    assert s.storage.snapshot().meta.index == 0


def test_raft_restart_from_compacted_storage() -> None:
    """7: 1. storage with snapshot 3 and entry 4, commit 4; 2. new core. Expected: applied
    starts at 3 (the driver restored the snapshot), entry 4 is re-applied, entries below the
    snapshot are gone (LogCompacted)."""
    st = _storage_compacted()
    st.set_hard_state(HardState(term=Term(1), vote=None, commit=LogIndex(4)))
    s = solo(storage=st)
    assert s.applied == [4]
    with pytest.raises(LogCompacted):
        s.core.log.slice(LogIndex(2), LogIndex(4), 1 << 20)


def test_raft_cluster_catches_up_a_restarted_member_by_snapshot() -> None:
    """7 end to end: 1. n2 is down while 12 entries commit; 2. n0 and n1 compact their logs;
    3. n2 restarts. Expected: n2 receives a snapshot, then the tail, and applies exactly the
    same payloads as the others."""
    c = Cluster(seed=11)
    c.elect()
    c.crash("n2")
    for i in range(12):
        c.propose(b"v%d" % i)
        c.run(1)
    c.run(5)
    for node_id in ("n0", "n1"):
        c.compact(node_id)
    c.restart("n2")
    c.run(40)
    assert c.applied("n2") == c.applied("n0") == [b"v%d" % i for i in range(12)]
    assert c.nodes["n2"].storage.snapshot().meta.index > 0


# -- leadership transfer (DLedger handleLeadershipTransfer / handleTakeLeadership) -------------


def test_raft_transfer_to_caught_up_follower_sends_take_leadership() -> None:
    """1. leader of term 1, n1 matched the whole log; 2. transfer_leadership(n1).
    Expected: TakeLeadership(term 1, ledgerEndIndex 1) to n1; proposals now raise
    LeadershipTransferring."""
    s = solo()
    make_leader(s)
    s.step(append_ok("n1", "n0", 1, 1))
    s.core.transfer_leadership("n1")
    out = of_type(s.drain(), TakeLeadershipRequest)
    assert [(m.to_id, m.term, m.ledger_end_index) for m in out] == [("n1", 1, 1)]
    with pytest.raises(LeadershipTransferring):
        s.core.propose(b"x")


def test_raft_transfer_waits_for_the_transferee_to_catch_up() -> None:
    """Seed 002 (Xiaomi fix): 1. leader with 3 entries, n2 matched nothing; 2. transfer to n2.
    Expected: no TakeLeadership until n2 acknowledges the last index; then it is sent."""
    s = solo()
    make_leader(s)
    s.step(append_ok("n1", "n0", 1, 1))
    s.core.propose(b"a")
    s.core.propose(b"b")
    s.drain()
    s.core.transfer_leadership("n2")
    assert not of_type(s.drain(), TakeLeadershipRequest)
    s.step(append_ok("n2", "n0", 1, 2))
    assert not of_type(s.sent, TakeLeadershipRequest)
    out = s.step(append_ok("n2", "n0", 1, 3))
    assert [m.to_id for m in of_type(out, TakeLeadershipRequest)] == ["n2"]


def test_raft_transfer_times_out_and_writes_resume() -> None:
    """1. transfer to n2 which never answers; 2. tick past transfer_timeout_ticks (answering
    heartbeats from n1 to keep the quorum). Expected: transferee cleared, propose works."""
    s = solo()
    make_leader(s)
    s.step(append_ok("n1", "n0", 1, 1))
    s.core.transfer_leadership("n2")
    for _ in range(FAST.transfer_timeout_ticks + 1):
        for m in of_type(s.ticks(1), HeartbeatRequest):
            if m.to_id == "n1":
                s.step(beat_ok("n1", "n0", 1, m.beat_round))
    assert s.core.status().transferee is None
    assert s.core.propose(b"after") == 2


def test_raft_transfer_errors() -> None:
    """transfer_leadership on a follower raises NotLeader; to a stranger, ValueError."""
    s = follower_of("n1", 1)
    with pytest.raises(NotLeader):
        s.core.transfer_leadership("n2")
    t = solo()
    make_leader(t)
    with pytest.raises(ValueError, match="not a member"):
        t.core.transfer_leadership("n7")


def test_raft_transfer_end_to_end() -> None:
    """1. three members, leader L with 5 committed entries; 2. transfer to a follower F.
    Expected: F becomes leader in the next term, nothing committed is lost, writes go on."""
    c = Cluster(seed=5)
    leader = c.elect()
    for i in range(5):
        c.propose(b"t%d" % i)
    c.run(3)
    target = next(i for i in c.ids if i != leader)
    term = c.core(leader).term
    c.core(leader).transfer_leadership(target)
    c.flush(leader)
    for _ in range(30):
        c.run(1)
        if c.leader() == target:
            break
    assert c.leader() == target
    assert c.core(target).term == term + 1
    c.propose(b"after")
    c.run(5)
    for node_id in c.ids:
        assert c.applied(node_id) == [b"t%d" % i for i in range(5)] + [b"after"]


def test_raft_preferred_leader_takes_over_when_caught_up() -> None:
    """Seed 002 / DLedger preferredLeaderIds: 1. preferred leader n2 is down while n0 or n1
    is elected; 2. n2 comes back and catches up. Expected: leadership moves to n2 by itself."""
    cfg = dataclasses.replace(FAST, preferred_leader_ids=("n2",), max_transfer_lag=10)
    c = Cluster(seed=2, config=cfg)
    c.crash("n2")
    first = c.elect()
    assert first != "n2"
    for i in range(3):
        c.propose(b"p%d" % i)
    c.restart("n2")
    for _ in range(200):
        c.run(1)
        if c.leader() == "n2" and all(c.core(i).leader_id == "n2" for i in c.ids):
            break
    assert c.leader() == "n2"
    assert c.core("n2").role is Role.LEADER
    c.propose(b"on-n2")
    c.run(5)
    assert c.applied("n0")[-1] == b"on-n2"


def test_raft_snapshot_data_is_what_the_state_machine_supplied() -> None:
    """The test network's snapshot is a msgpack list of (index, payload) pairs, and a member
    restored from it continues applying from snapshot index + 1."""
    c = Cluster(seed=4)
    c.elect()
    for i in range(4):
        c.propose(b"s%d" % i)
    c.run(4)
    c.compact("n1")
    snap = c.nodes["n1"].storage.snapshot()
    assert [p for _i, p in msgpack.unpackb(snap.data)] == [b"s%d" % i for i in range(4)]
    c.crash("n1")
    c.restart("n1")
    c.elect()
    c.propose(b"s4")
    c.run(5)
    assert c.applied("n1") == [b"s%d" % i for i in range(5)]
