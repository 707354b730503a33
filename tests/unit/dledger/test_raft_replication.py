"""Raft paper section 5.3 (log replication, log matching), 5.4.2 (commit rule), pipelining and
batching of DLedger's entry pusher, and the Ready/advance contract."""

from __future__ import annotations

import dataclasses

import pytest

from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.core import NotLeader, Role
from rocketpy.dledger.messages import (
    AppendRequest,
    AppendResponse,
    EntryKind,
    HeartbeatRequest,
    ResponseCode,
)
from rocketpy.dledger.storage import MemoryStorage
from tests.helpers.raft_net import FAST, Cluster, solo
from tests.helpers.raft_steps import (
    append,
    append_ok,
    beat,
    beat_ok,
    entries,
    follower_of,
    make_leader,
    of_type,
    storage_with,
)

# -- 5.3 leader side ---------------------------------------------------------------------------


def test_raft_propose_on_follower_raises_not_leader_with_hint() -> None:
    """5.3: 1. follower of n1; 2. propose. Expected: NotLeader naming n1."""
    s = follower_of("n1", 1)
    with pytest.raises(NotLeader) as info:
        s.core.propose(b"x")
    assert info.value.leader_id == "n1"


def test_raft_leader_replicates_then_commits_on_quorum() -> None:
    """5.3: 1. leader of term 1 (NOOP at 1); 2. n1 acknowledges the NOOP -> committed;
    3. propose b"a" -> append prev (1, 1) with entry 2 to n1 (n2 still probing); 4. n2
    acknowledges 2.
    Expected: commit 2, committed entries handed out in order (1 NOOP, then 2)."""
    s = solo()
    make_leader(s)
    s.step(append_ok("n1", "n0", 1, 1))
    assert s.core.log.committed == 1
    index = s.core.propose(b"a")
    out = of_type(s.drain(), AppendRequest)
    # n1 replicates; n2 is still probing (its NOOP append is unanswered), so it is paused.
    assert [(m.to_id, m.prev_index, m.prev_term, [e.index for e in m.entries]) for m in out] == [
        ("n1", 1, 1, [index])
    ]
    s.step(append_ok("n2", "n0", 1, 2))
    assert s.core.log.committed == 2
    assert s.applied == [1, 2]


def test_raft_single_member_commits_alone() -> None:
    """5.3 quorum of one: 1. group {n0}; 2. tick once (elects itself); 3. propose.
    Expected: leader, and the entry is committed and applied in the same drain."""
    s = solo(peers=("n0",))
    s.ticks(1)
    assert s.core.role is Role.LEADER
    s.core.propose(b"x")
    s.drain()
    assert s.applied == [1, 2]


def test_raft_leader_backs_up_after_rejection() -> None:
    """5.3: 1. leader with log terms 1,1,2 elected in term 3 (NOOP at 4); 2. n1 rejects
    prev 3 with hint 1 (it has one entry). Expected: next append starts after index 1 and
    carries entries 2..(batch limit)."""
    s = solo(storage=storage_with(1, 1, 2, term=2))
    make_leader(s)
    s.step(
        AppendResponse(
            from_id="n1",
            to_id="n0",
            term=Term(3),
            code=ResponseCode.INCONSISTENT_STATE,
            index=LogIndex(3),
            hint=LogIndex(1),
        )
    )
    last = of_type(s.sent, AppendRequest)[-1]
    assert (last.to_id, last.prev_index, last.prev_term) == ("n1", 1, 1)
    assert [e.index for e in last.entries] == [2, 3, 4][: FAST.max_entries_per_append]


def test_raft_stale_rejection_is_ignored() -> None:
    """Reordering: 1. n1 matched up to 4; 2. an old rejection of prev 2 arrives.
    Expected: match stays 4, nothing resent from 2."""
    s = solo(storage=storage_with(1, 1, 2, term=2))
    make_leader(s)
    s.step(append_ok("n1", "n0", 3, 4))
    before = len(s.sent)
    s.step(
        AppendResponse(
            from_id="n1",
            to_id="n0",
            term=Term(3),
            code=ResponseCode.INCONSISTENT_STATE,
            index=LogIndex(2),
            hint=LogIndex(1),
        )
    )
    assert s.core.progress["n1"].match == 4
    assert not [m for m in s.sent[before:] if isinstance(m, AppendRequest) and m.prev_index < 4]


def test_raft_pipelining_keeps_several_appends_in_flight() -> None:
    """DLedger pipelined pushes: 1. leader, n1 in REPLICATE (acknowledged the NOOP);
    2. propose 6 entries one drain at a time with max 2 entries/append, 3 in flight.
    Expected: appends to n1 go out without waiting for answers until 3 are in flight, then
    pause; one acknowledgement lets the next one out."""
    cfg = dataclasses.replace(FAST, max_entries_per_append=1, max_inflight_appends=3)
    s = solo(config=cfg)
    make_leader(s)
    s.step(append_ok("n1", "n0", 1, 1))
    to_n1: list[AppendRequest] = []
    for i in range(6):
        s.core.propose(b"p%d" % i)
        to_n1 += [m for m in of_type(s.drain(), AppendRequest) if m.to_id == "n1"]
    assert [m.entries[0].index for m in to_n1] == [2, 3, 4]
    out = s.step(append_ok("n1", "n0", 1, 2))
    assert [m.entries[0].index for m in of_type(out, AppendRequest) if m.to_id == "n1"] == [5]


def test_raft_proposals_are_batched_per_append() -> None:
    """DLedger batch push: 1. leader, n1 replicating; 2. five proposals before one drain,
    batch limit 3. Expected: two appends to n1 carrying 3 and 2 entries."""
    s = solo()
    make_leader(s)
    s.step(append_ok("n1", "n0", 1, 1))
    for i in range(5):
        s.core.propose(b"b%d" % i)
    out = [m for m in of_type(s.drain(), AppendRequest) if m.to_id == "n1"]
    assert [len(m.entries) for m in out] == [3, 2]


def test_raft_heartbeat_carries_commit_bounded_by_match() -> None:
    """1. leader commits 1 via n1; 2. heartbeat interval passes. Expected: n1's heartbeat says
    commit 1, n2's (match 0) says 0."""
    s = solo()
    make_leader(s)
    s.step(append_ok("n1", "n0", 1, 1))
    out = of_type(s.ticks(FAST.heartbeat_interval_ticks), HeartbeatRequest)
    assert {m.to_id: m.commit_index for m in out} == {"n1": 1, "n2": 0}


def test_raft_heartbeat_answer_resumes_a_lagging_follower() -> None:
    """Loss recovery: 1. the append to n2 was lost (probe paused); 2. n2 answers a heartbeat.
    Expected: the append is sent again."""
    s = solo()
    make_leader(s)
    out = of_type(s.ticks(FAST.heartbeat_interval_ticks), HeartbeatRequest)
    rnd = next(m.beat_round for m in out if m.to_id == "n2")
    resent = of_type(s.step(beat_ok("n2", "n0", 1, rnd)), AppendRequest)
    assert [(m.to_id, m.prev_index) for m in resent] == [("n2", 0)]


# -- 5.3 follower side -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prev_index", "prev_term", "new", "ok", "log_after"),
    [
        (2, 2, [3], True, [1, 2, 3]),  # append at the end
        (1, 1, [3], True, [1, 3]),  # conflicting tail replaced
        (0, 0, [1, 2], True, [1, 2]),  # duplicate: nothing changes
        (2, 3, [3], False, [1, 2]),  # prev term mismatch
        (3, 2, [3], False, [1, 2]),  # prev beyond the log
        (1, 1, [], True, [1, 2]),  # empty probe keeps the tail
    ],
)
def test_raft_follower_append_table(
    prev_index: int, prev_term: int, new: list[int], ok: bool, log_after: list[int]
) -> None:
    """5.3 AppendEntries receiver (etcd TestFollowerAppendEntries): 1. follower with terms
    [1, 2] in term 3; 2. append(prev, terms ``new``). Expected: SUCCESS with the last new index
    or INCONSISTENT_STATE naming prev_index with the follower's last index as hint; the log
    afterwards has the listed terms."""
    s = follower_of("n1", 3, 1, 2)
    out = of_type(
        s.step(append("n1", "n0", 3, prev_index, prev_term, entries(*new, start=prev_index + 1))),
        AppendResponse,
    )
    resp = out[0]
    if ok:
        assert (resp.code, resp.index) == (ResponseCode.SUCCESS, prev_index + len(new))
    else:
        assert (resp.code, resp.index, resp.hint) == (
            ResponseCode.INCONSISTENT_STATE,
            prev_index,
            min(prev_index, 2),
        )
    log = s.core.log
    assert [log.term(LogIndex(i)) for i in range(1, log.last_index() + 1)] == log_after
    assert [
        e.term for e in s.storage.entries(LogIndex(1), LogIndex(len(log_after) + 1), 1 << 20)
    ] == log_after


def test_raft_follower_commits_from_leader_commit_bounded_by_new_entries() -> None:
    """5.3: 1. follower with [1]; 2. append prev (1,1) entries [1] with leader commit 5.
    Expected: commit 2 (never beyond the last new entry), entries 1 and 2 applied."""
    s = follower_of("n1", 1, 1)
    s.step(append("n1", "n0", 1, 1, 1, entries(1, start=2), commit=5))
    assert s.core.log.committed == 2
    assert s.applied == [1, 2]


def test_raft_follower_heartbeat_commit() -> None:
    """1. follower with [1, 1]; 2. heartbeat with commit 2. Expected: commit 2."""
    s = follower_of("n1", 1, 1, 1)
    s.step(beat("n1", "n0", 1, commit=2, rnd=2))
    assert s.core.log.committed == 2


def test_raft_append_below_commit_answers_commit() -> None:
    """1. follower committed 2; 2. an old append with prev 0 arrives (duplicate).
    Expected: SUCCESS with index 2, log unchanged."""
    s = follower_of("n1", 1, 1, 1)
    s.step(beat("n1", "n0", 1, commit=2, rnd=2))
    out = of_type(s.step(append("n1", "n0", 1, 0, 0, entries(1))), AppendResponse)
    assert (out[0].code, out[0].index) == (ResponseCode.SUCCESS, 2)


def test_raft_leader_syncs_divergent_followers() -> None:
    """5.3 figure 7: 1. three members with divergent logs (n0: 1,1,2; n1: 1,3,3 uncommitted
    in term 3; n2: 1); 2. n1 wins term 4 (most up to date); 3. run. Expected: every log equals
    n1's plus its NOOP; n0's term-2 entry is gone."""
    c = Cluster(seed=3)
    logs = {"n0": (1, 1, 2), "n1": (1, 3, 3), "n2": (1,)}
    for node_id, terms in logs.items():
        c.nodes[node_id].storage = storage_with(*terms, term=3)
        c.restart(node_id)
    c.core("n1").campaign()
    c.flush("n1")
    c.deliver_all()
    assert c.leader() == "n1"
    c.run(10)
    want = [1, 3, 3, 4]
    for node_id in c.ids:
        log = c.core(node_id).log
        assert [log.term(LogIndex(i)) for i in range(1, log.last_index() + 1)] == want
        assert log.committed == 4


# -- 5.4.2 commit rule -------------------------------------------------------------------------


def test_raft_old_term_entry_not_committed_by_counting() -> None:
    """5.4.2: 1. n0 with [1, 2] (entry 2 from term 2, never committed) wins term 3
    (NOOP at 3); 2. n1 acknowledges up to 2 only. Expected: commit stays 0 although a majority
    holds entry 2; 3. n1 acknowledges 3 -> commit 3 (entry 2 commits indirectly)."""
    s = solo(storage=storage_with(1, 2, term=2))
    make_leader(s)
    s.step(append_ok("n1", "n0", 3, 2))
    assert s.core.log.committed == 0
    s.step(append_ok("n1", "n0", 3, 3))
    assert s.core.log.committed == 3


def test_raft_figure_8_old_term_entry_on_a_majority_is_still_overwritable() -> None:
    """5.4.2 figure 8 (5 members): 1. n0 holds [1, 2@t2] and leads term 4 (NOOP 3@t4);
    n1 acknowledges 3 and n2 acknowledges 2, so entry 2 sits on a majority (n0, n1, n2).
    Expected: not committed (its term is 2). 2. Why it must not be: n0 crashes, n1 is cut off,
    n4 with [1, 2@t3] campaigns and wins with n2 and n3 (their last term 2 and 1 are older),
    then overwrites index 2 on n2 and n3."""
    ids = ("n0", "n1", "n2", "n3", "n4")
    s = solo(peers=ids, storage=storage_with(1, 2, term=3))
    make_leader(s)
    assert (s.core.term, s.core.log.last_index()) == (4, 3)
    s.step(append_ok("n1", "n0", 4, 3))
    s.step(append_ok("n2", "n0", 4, 2))
    assert s.core.log.committed == 0, "an old-term entry was committed by counting replicas"

    c = Cluster(ids, seed=8)
    layout = {"n0": (1, 2, 4), "n1": (1, 2, 4), "n2": (1, 2), "n3": (1,), "n4": (1, 3)}
    for node_id, terms in layout.items():
        c.nodes[node_id].storage = storage_with(*terms, term=4)
        c.restart(node_id)
    c.crash("n0")
    c.partition(["n2", "n3", "n4"], ["n1"], ["n0"])
    c.core("n4").campaign()
    c.flush("n4")
    c.deliver_all()
    assert c.leader() == "n4"
    c.run(5)
    for node_id in ("n2", "n3", "n4"):
        assert c.core(node_id).log.term(LogIndex(2)) == 3


# -- Ready / advance contract ------------------------------------------------------------------


def test_raft_ready_must_be_advanced_before_the_next() -> None:
    """1. ready(); 2. ready() again. Expected: RuntimeError; advance() of a foreign Ready too."""
    s = solo()
    s.core.campaign()
    rd = s.core.ready()
    with pytest.raises(RuntimeError):
        s.core.ready()
    with pytest.raises(RuntimeError):
        s.core.advance(dataclasses.replace(rd))
    s.core.advance(rd)


def test_raft_commit_only_hard_state_needs_no_sync() -> None:
    """etcd MustSync: 1. follower with [1, 1]; 2. heartbeat raising commit to 2.
    Expected: the Ready has a hard state (commit 2) but must_sync is False."""
    s = follower_of("n1", 1, 1, 1)
    s.core.step(beat("n1", "n0", 1, commit=2, rnd=2))
    rd = s.core.ready()
    assert rd.hard_state is not None
    assert (rd.hard_state.commit, rd.must_sync) == (2, False)
    assert [e.index for e in rd.committed_entries] == [1, 2]


def test_raft_restart_reapplies_committed_prefix() -> None:
    """Restart: 1. follower commits 2 of 2 entries; 2. rebuild the core over its storage.
    Expected: the first Ready hands out entries 1 and 2 again (the state machine is rebuilt
    from the snapshot, here empty)."""
    s = follower_of("n1", 1, 1, 1)
    s.step(beat("n1", "n0", 1, commit=2, rnd=2))
    again = solo(storage=s.storage)
    assert again.applied == [1, 2]


def test_raft_noop_entry_kind() -> None:
    """The leader's first entry of its term is a NOOP with no data."""
    s = solo()
    make_leader(s)
    noop = s.core.log.slice(LogIndex(1), LogIndex(2), 1 << 20)[0]
    assert (noop.kind, noop.data, noop.term) == (EntryKind.NOOP, b"", 1)


def test_raft_messages_to_other_nodes_are_ignored() -> None:
    """A message addressed to n1 delivered to n0 changes nothing."""
    s = solo(storage=MemoryStorage())
    assert s.step(beat("n1", "n1", 5)) == []
    assert s.core.term == 0
