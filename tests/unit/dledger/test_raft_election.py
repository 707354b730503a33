"""Raft paper section 5.1 (terms), 5.2 (leader election), 5.4.1 (election restriction) and the
DLedger vote results / candidate reactions of seed 001, arranged init -> step -> check over one
core (model: etcd-io/raft raft_paper_test.go)."""

from __future__ import annotations

import random

import pytest

from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.core import RaftCore, Role
from rocketpy.dledger.election import Backoff, VoteTally
from rocketpy.dledger.messages import (
    AppendResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    ParseResult,
    ResponseCode,
    TakeLeadershipRequest,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from rocketpy.dledger.storage import MemoryStorage
from tests.helpers.raft_net import FAST, Solo, persist, solo
from tests.helpers.raft_steps import (
    append,
    beat,
    beat_ok,
    entries,
    follower_of,
    grant_votes,
    make_leader,
    of_type,
    storage_with,
    vote_req,
)

# -- 5.1 terms ---------------------------------------------------------------------------------


def test_raft_member_starts_as_candidate_in_persisted_term() -> None:
    """5.1 / DLedger MemberState: 1. restart over a hard state (term 4, vote n2).
    Expected: role CANDIDATE, term 4, vote n2 (persisted state is reloaded)."""
    s = solo(storage=storage_with(term=4, vote="n2"))
    st = s.core.status()
    assert (st.role, st.term, st.vote) == (Role.CANDIDATE, 4, "n2")


def test_raft_heartbeat_from_higher_term_answers_term_not_ready() -> None:
    """5.1 + seed 001 heartbeat rule: 1. follower of n1 in term 1; 2. heartbeat from n2 in
    term 3. Expected: TERM_NOT_READY, the member moves to term 3 as a candidate without a
    vote; 3. the next heartbeat of term 3 makes it n2's follower (leaderId was empty)."""
    s = follower_of("n1", 1)
    out = of_type(s.step(beat("n2", "n0", 3)), HeartbeatResponse)
    assert out[0].code is ResponseCode.TERM_NOT_READY
    assert (s.core.role, s.core.term, s.core.vote) == (Role.CANDIDATE, 3, None)
    out = of_type(s.step(beat("n2", "n0", 3, rnd=2)), HeartbeatResponse)
    assert out[0].code is ResponseCode.SUCCESS
    assert (s.core.role, s.core.leader_id) == (Role.FOLLOWER, "n2")


@pytest.mark.parametrize(
    ("request_term", "code"),
    [(1, ResponseCode.EXPIRED_TERM), (2, ResponseCode.SUCCESS)],
)
def test_raft_heartbeat_term_table(request_term: int, code: ResponseCode) -> None:
    """5.1: 1. follower of n1 in term 2; 2. heartbeat of term 1 or 2 from n1.
    Expected: a stale term gets EXPIRED_TERM carrying our term 2; the current one SUCCESS."""
    s = follower_of("n1", 2)
    out = of_type(s.step(beat("n1", "n0", request_term, rnd=7)), HeartbeatResponse)
    assert (out[0].code, out[0].term, out[0].beat_round) == (code, 2, 7)


def test_raft_heartbeat_from_other_leader_same_term_is_inconsistent() -> None:
    """Seed 001: 1. follower of n1 in term 2; 2. heartbeat from n2 also claiming term 2.
    Expected: INCONSISTENT_LEADER, still n1's follower."""
    s = follower_of("n1", 2)
    out = of_type(s.step(beat("n2", "n0", 2)), HeartbeatResponse)
    assert out[0].code is ResponseCode.INCONSISTENT_LEADER
    assert s.core.leader_id == "n1"


def test_raft_append_from_higher_term_is_accepted_as_that_terms_leader() -> None:
    """5.1: 1. candidate in term 1; 2. append from n2 in term 5. Expected: follower of n2 in
    term 5 with the vote cleared, the append acknowledged."""
    s = solo(storage=storage_with(term=1, vote="n0"))
    out = s.step(append("n2", "n0", 5, 0, 0, entries(5)))
    assert (s.core.role, s.core.term, s.core.leader_id, s.core.vote) == (
        Role.FOLLOWER,
        5,
        "n2",
        None,
    )
    assert of_type(out, AppendResponse)[0].code is ResponseCode.SUCCESS


def test_raft_stale_append_gets_expired_term() -> None:
    """5.1: 1. member in term 3; 2. append from term 2. Expected: EXPIRED_TERM with term 3,
    log untouched."""
    s = solo(storage=storage_with(term=3))
    out = s.step(append("n1", "n0", 2, 0, 0, entries(2)))
    resp = of_type(out, AppendResponse)[0]
    assert (resp.code, resp.term) == (ResponseCode.EXPIRED_TERM, 3)
    assert s.core.log.last_index() == 0


def test_raft_leader_steps_down_on_expired_term_heartbeat_response() -> None:
    """5.1: 1. leader in term 1; 2. a heartbeat answer EXPIRED_TERM with term 4.
    Expected: candidate; its next round jumps straight to term 4 (knownMaxTermInGroup)."""
    s = solo()
    make_leader(s)
    rnd = of_type(s.sent, HeartbeatRequest)[-1].beat_round
    s.step(
        HeartbeatResponse(
            from_id="n1", to_id="n0", term=Term(4), beat_round=rnd, code=ResponseCode.EXPIRED_TERM
        )
    )
    assert s.core.role is Role.CANDIDATE
    s.core.campaign()
    assert s.core.term == 4


# -- 5.2 leader election -----------------------------------------------------------------------


def test_raft_follower_campaigns_after_max_heartbeat_leak_intervals() -> None:
    """5.2 / maintainAsFollower: 1. follower of n1; 2. tick leak x interval ticks: still a
    follower; 3. one more tick. Expected: candidate; the next tick sends vote requests."""
    s = follower_of("n1", 1)
    limit = FAST.max_heartbeat_leak * FAST.heartbeat_interval_ticks
    s.ticks(limit)
    assert s.core.status().role is Role.FOLLOWER
    s.ticks(1)
    assert s.core.status().role is Role.CANDIDATE
    out = of_type(s.ticks(1), VoteRequest)
    assert {m.to_id for m in out} == {"n1", "n2"}


def test_raft_heartbeat_resets_follower_timer() -> None:
    """5.2: 1. follower; 2. a heartbeat every interval for 10 intervals. Expected: never
    becomes a candidate."""
    s = follower_of("n1", 1)
    for rnd in range(10):
        s.ticks(FAST.heartbeat_interval_ticks)
        s.step(beat("n1", "n0", 1, rnd=rnd + 2))
    assert s.core.role is Role.FOLLOWER


def test_raft_candidate_asks_every_peer_with_its_ledger_end() -> None:
    """5.2 / voteForQuorumResponses: 1. member with entries of terms 1,1,2 in term 2;
    2. campaign. Expected: term 3, self vote persisted before sending (Ready has the hard state
    and must_sync), VoteRequest(term 3, ledgerEndTerm 2, ledgerEndIndex 3) to n1 and n2."""
    s = solo(storage=storage_with(1, 1, 2, term=2))
    s.core.campaign()
    rd = s.core.ready()
    assert rd.hard_state is not None
    assert (rd.hard_state.term, rd.hard_state.vote, rd.must_sync) == (3, "n0", True)
    reqs = of_type(list(rd.messages), VoteRequest)
    assert sorted(m.to_id for m in reqs) == ["n1", "n2"]
    assert {(m.term, m.ledger_end_term, m.ledger_end_index) for m in reqs} == {(3, 2, 3)}


@pytest.mark.parametrize(
    ("size", "accepts", "leader"),
    [(1, 0, True), (3, 1, True), (3, 0, False), (5, 2, True), (5, 1, False)],
)
def test_raft_candidate_needs_a_quorum(size: int, accepts: int, leader: bool) -> None:
    """5.2: 1. group of ``size``; 2. campaign; 3. ``accepts`` peers accept, the rest never
    answer. Expected: leader iff self + accepts is a majority."""
    peers = tuple(f"n{i}" for i in range(size))
    s = solo(peers=peers)
    s.core.campaign()
    s.drain()
    if size > 1:
        grant_votes(s, list(peers[1 : 1 + accepts]))
    assert (s.core.role is Role.LEADER) is leader


def test_raft_new_leader_appends_noop_and_heartbeats_at_once() -> None:
    """5.2 / changeRoleToLeader: 1. win term 1. Expected: a NOOP at index 1 (term_start_index),
    a heartbeat to each peer and an append carrying the NOOP."""
    s = solo()
    make_leader(s)
    assert s.core.status().term_start_index == 1
    sent = s.sent
    assert {m.to_id for m in of_type(sent, HeartbeatRequest)} == {"n1", "n2"}
    assert s.core.log.last_index() == 1


def test_raft_leader_heartbeats_every_interval() -> None:
    """5.2 / maintainAsLeader: 1. leader; 2. tick 3 intervals, peers answering.
    Expected: 3 more heartbeats to each peer, leadership kept."""
    s = solo()
    make_leader(s)
    for _ in range(3):
        out = of_type(s.ticks(FAST.heartbeat_interval_ticks), HeartbeatRequest)
        assert sorted(m.to_id for m in out) == ["n1", "n2"]
        for m in out:
            s.step(beat_ok(m.to_id, "n0", 1, m.beat_round))
    assert s.core.role is Role.LEADER


def test_raft_leader_without_quorum_steps_down() -> None:
    """5.2 / sendHeartbeats: 1. leader; 2. no heartbeat is answered for more than
    maxHeartBeatLeak intervals. Expected: it becomes a candidate."""
    s = solo()
    make_leader(s)
    s.ticks(FAST.heartbeat_interval_ticks * (FAST.max_heartbeat_leak + 2))
    assert s.core.role is Role.CANDIDATE


def test_raft_candidate_follows_heartbeat_of_same_term() -> None:
    """5.2: 1. candidate in term 1 waiting for votes; 2. heartbeat from n2 in term 1.
    Expected: follower of n2."""
    s = solo()
    s.core.campaign()
    s.drain()
    s.step(beat("n2", "n0", 1))
    assert (s.core.role, s.core.leader_id) == (Role.FOLLOWER, "n2")


def test_raft_vote_intervals_come_from_the_injected_rng() -> None:
    """5.2 randomized timeouts: 1. two cores with the same seed, one with another seed;
    2. campaign and let each round time out. Expected: same seed -> same tick of the next
    round; the waits stay within vote wait + 2 x max vote interval."""

    def next_round_tick(seed: int) -> int:
        core = RaftCore("n0", ("n0", "n1", "n2"), MemoryStorage(), random.Random(seed), FAST)
        core.campaign()
        core.advance(core.ready())
        for t in range(1, 200):
            core.tick()
            rd = core.ready()
            core.advance(rd)
            if of_type(list(rd.messages), VoteRequest):
                return t  # no answers: WAIT_TO_REVOTE, same term, after a random interval
        raise AssertionError("no second round")

    ticks = [next_round_tick(seed) for seed in range(20)]
    assert ticks == [next_round_tick(seed) for seed in range(20)]
    assert len(set(ticks)) > 1
    longest = FAST.vote_wait_ticks + 2 * FAST.max_vote_interval_ticks
    assert all(FAST.vote_wait_ticks <= t <= longest for t in ticks)


def test_raft_duplicated_vote_response_counts_once() -> None:
    """Election Safety under duplication: 1. 5-member candidate; 2. n1's ACCEPT delivered
    three times. Expected: not a leader (2 of 5 is no quorum)."""
    peers = ("n0", "n1", "n2", "n3", "n4")
    s = solo(peers=peers)
    s.core.campaign()
    s.drain()
    for _ in range(3):
        grant_votes(s, ["n1"])
    assert s.core.role is Role.CANDIDATE


# -- seed 001 vote results ---------------------------------------------------------------------


def _vote(s_term: int, vote: str | None, log: tuple[int, ...], req: VoteRequest) -> VoteResponse:
    s = solo(storage=storage_with(*log, term=s_term, vote=vote))
    out = of_type(s.step(req), VoteResponse)
    assert len(out) == 1
    return out[0]


@pytest.mark.parametrize(
    ("term", "vote", "log", "req", "result"),
    [
        pytest.param(1, None, (1,), vote_req("n1", "n0", 1, 1, 1), VoteResult.ACCEPT, id="accept"),
        pytest.param(
            1, "n1", (1,), vote_req("n1", "n0", 1, 1, 1), VoteResult.ACCEPT, id="accept-again"
        ),
        pytest.param(
            1, None, (), vote_req("n9", "n0", 1), VoteResult.REJECT_UNKNOWN_LEADER, id="unknown"
        ),
        pytest.param(
            1, None, (), vote_req("n0", "n0", 1), VoteResult.REJECT_UNEXPECTED_LEADER, id="self"
        ),
        pytest.param(
            3,
            None,
            (1, 2),
            vote_req("n1", "n0", 4, 1, 5),
            VoteResult.REJECT_EXPIRED_LEDGER_TERM,
            id="older-ledger-term",
        ),
        pytest.param(
            3,
            None,
            (1, 2),
            vote_req("n1", "n0", 4, 2, 1),
            VoteResult.REJECT_SMALL_LEDGER_END_INDEX,
            id="shorter-ledger",
        ),
        pytest.param(
            3,
            None,
            (1,),
            vote_req("n1", "n0", 2, 1, 1),
            VoteResult.REJECT_EXPIRED_VOTE_TERM,
            id="older-term",
        ),
        pytest.param(
            3,
            "n2",
            (1,),
            vote_req("n1", "n0", 3, 1, 1),
            VoteResult.REJECT_ALREADY_VOTED,
            id="voted-other",
        ),
        pytest.param(
            3,
            None,
            (1,),
            vote_req("n1", "n0", 5, 1, 1),
            VoteResult.REJECT_TERM_NOT_READY,
            id="newer-term",
        ),
        pytest.param(
            1,
            None,
            (3,),
            vote_req("n1", "n0", 1, 3, 1),
            VoteResult.REJECT_TERM_SMALL_THAN_LEDGER,
            id="term-below-ledger",
        ),
    ],
)
def test_raft_vote_result_table(
    term: int, vote: str | None, log: tuple[int, ...], req: VoteRequest, result: VoteResult
) -> None:
    """Seed 001 handleVote: 1. a member restarted with (term, vote, log); 2. one vote request.
    Expected: the listed VoteResult (checks run in upstream order)."""
    assert _vote(term, vote, log, req).result is result


def test_raft_vote_already_has_leader() -> None:
    """Seed 001: 1. follower of n1 in term 2 (it voted for n1); 2. n2 asks in term 2.
    Expected: REJECT_ALREADY_HAS_LEADER."""
    s = solo(storage=storage_with(term=2, vote="n1"))
    s.step(beat("n1", "n0", 2))
    assert s.core.leader_id == "n1"
    out = of_type(s.step(vote_req("n2", "n0", 2)), VoteResponse)
    assert out[0].result is VoteResult.REJECT_ALREADY_HAS_LEADER


def test_raft_term_small_than_ledger_reports_ledger_term() -> None:
    """Seed 001: REJECT_TERM_SMALL_THAN_LEDGER carries the voter's ledgerEndTerm (3), which
    the candidate records as knownMaxTermInGroup."""
    resp = _vote(1, None, (3,), vote_req("n1", "n0", 1, 3, 1))
    assert resp.term == 3


def test_raft_accepted_vote_is_durable_before_the_response() -> None:
    """5.2 + fsync rule: 1. member in term 1; 2. ACCEPT for n1. Expected: the Ready holding
    the VoteResponse also holds hard state (1, n1) with must_sync; after a restart over the
    storage, n2 asking in term 1 gets REJECT_ALREADY_VOTED."""
    s = solo(storage=storage_with(term=1))
    s.core.step(vote_req("n1", "n0", 1))
    rd = s.core.ready()
    assert rd.hard_state is not None
    assert (rd.hard_state.vote, rd.must_sync) == ("n1", True)
    assert of_type(list(rd.messages), VoteResponse)[0].result is VoteResult.ACCEPT
    persist(s.storage, rd)
    s.core.advance(rd)
    again = solo(storage=s.storage)
    out = of_type(again.step(vote_req("n2", "n0", 1)), VoteResponse)
    assert out[0].result is VoteResult.REJECT_ALREADY_VOTED


def test_raft_taking_leadership_rejects_other_candidates() -> None:
    """Seed 001 REJECT_TAKING_LEADERSHIP: 1. follower n0 of n1 (term 1, same log); 2. n1 asks
    n0 to take leadership (n0 campaigns in term 2); 3. n2 asks n0 for a vote in term 2 with an
    equal log. Expected: REJECT_TAKING_LEADERSHIP."""
    s = follower_of("n1", 1, 1)
    s.step(
        TakeLeadershipRequest(from_id="n1", to_id="n0", term=Term(1), ledger_end_index=LogIndex(1))
    )
    assert (s.core.role, s.core.term) == (Role.CANDIDATE, 2)
    out = of_type(s.step(vote_req("n2", "n0", 2, 1, 1)), VoteResponse)
    assert out[0].result is VoteResult.REJECT_TAKING_LEADERSHIP


# -- 5.4.1 election restriction ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("voter_log", "cand_term", "cand_index", "granted"),
    [
        ((1, 1), 1, 3, True),  # same last term, longer
        ((1, 1), 1, 2, True),  # same last term, as long
        ((1, 1), 1, 1, False),  # same last term, shorter
        ((1, 1), 2, 1, True),  # higher last term wins even if shorter
        ((1, 2), 1, 5, False),  # lower last term loses even if longer
    ],
)
def test_raft_voter_grants_only_up_to_date_logs(
    voter_log: tuple[int, ...], cand_term: int, cand_index: int, granted: bool
) -> None:
    """5.4.1 (etcd TestVoter): 1. voter with ``voter_log`` in term 3; 2. candidate in term 3
    with (lastTerm, lastIndex). Expected: granted iff the candidate's log is at least as
    up to date."""
    resp = _vote(3, None, voter_log, vote_req("n1", "n0", 3, cand_term, cand_index))
    assert (resp.result is VoteResult.ACCEPT) is granted


# -- candidate reactions (ParseResult) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("results", "expected", "backoff"),
    [
        (["ACCEPT", "ACCEPT"], ParseResult.PASSED, Backoff.NONE),
        (["ACCEPT", "REJECT_TERM_NOT_READY"], ParseResult.REVOTE_IMMEDIATELY, Backoff.NONE),
        (["ACCEPT", "REJECT_ALREADY_HAS_LEADER"], ParseResult.WAIT_TO_REVOTE, Backoff.LEADER_LEASE),
        (["ACCEPT"], ParseResult.WAIT_TO_REVOTE, Backoff.VOTE_INTERVAL),
        (
            ["ACCEPT", "REJECT_SMALL_LEDGER_END_INDEX", "REJECT_EXPIRED_LEDGER_TERM"],
            ParseResult.WAIT_TO_REVOTE,
            Backoff.BIGGER_LEDGER,
        ),
        (
            ["REJECT_ALREADY_VOTED", "REJECT_ALREADY_VOTED"],
            ParseResult.WAIT_TO_VOTE_NEXT,
            Backoff.VOTE_INTERVAL,
        ),
        (
            ["ACCEPT", "REJECT_EXPIRED_VOTE_TERM@9"],
            ParseResult.WAIT_TO_VOTE_NEXT,
            Backoff.VOTE_INTERVAL,
        ),
        (
            ["ACCEPT", "REJECT_TAKING_LEADERSHIP"],
            ParseResult.WAIT_TO_VOTE_NEXT,
            Backoff.VOTE_INTERVAL,
        ),
    ],
)
def test_raft_parse_result_table(
    results: list[str], expected: ParseResult, backoff: Backoff
) -> None:
    """Seed 001 maintainAsCandidate: 1. a 5-member round in term 2 with the self vote
    (ACCEPT) and the listed peer answers (``@t`` = response term). Expected: the listed
    reaction and wait."""
    tally = VoteTally(term=Term(2), members=5)
    tally.add("n0", VoteResult.ACCEPT, Term(2))
    for i, item in enumerate(results, start=1):
        name, _, t = item.partition("@")
        tally.add(f"n{i}", VoteResult[name], Term(int(t) if t else 2))
    assert tally.parse() == (expected, backoff)


def test_raft_revote_immediately_resends_in_same_term() -> None:
    """Seed 001 REVOTE_IMMEDIATELY: 1. candidate of term 1 in a group of 3; 2. n1 answers
    REJECT_TERM_NOT_READY. Expected: a new round in the same term goes out at once; 3. n1 then
    accepts -> leader of term 1."""
    s = solo()
    s.core.campaign()
    s.drain()
    first = of_type(s.sent, VoteRequest)[-1]
    out = s.step(
        VoteResponse(
            from_id="n1",
            to_id="n0",
            term=Term(1),
            request_term=Term(1),
            vote_round=first.vote_round,
            result=VoteResult.REJECT_TERM_NOT_READY,
        )
    )
    again = of_type(out, VoteRequest)
    assert {m.term for m in again} == {1}
    assert {m.vote_round for m in again} == {first.vote_round + 1}
    assert s.core.status().last_parse_result is ParseResult.REVOTE_IMMEDIATELY
    grant_votes(s, ["n1"])
    assert (s.core.role, s.core.term) == (Role.LEADER, 1)


def test_raft_stale_round_responses_are_ignored() -> None:
    """1. candidate starts round r, then round r+1 (campaign again); 2. ACCEPTs of round r
    arrive. Expected: still a candidate."""
    s = solo()
    s.core.campaign()
    s.drain()
    old = of_type(s.sent, VoteRequest)[-1]
    s.core.campaign()
    s.drain()
    s.step(
        VoteResponse(
            from_id="n1",
            to_id="n0",
            term=old.term,
            request_term=old.term,
            vote_round=old.vote_round,
            result=VoteResult.ACCEPT,
        )
    )
    assert s.core.role is Role.CANDIDATE


# -- fast failover only on a leaderless quorum (node.py's campaign in the next term) -----------


def test_raft_follower_names_its_leader_only_while_it_hears_from_it() -> None:
    """1. follower of n1 in term 1 that voted for n1; 2. n2 asks for its vote in term 1.
    Expected: ALREADY_HAS_LEADER. 3. No heartbeat for (leak - 1) intervals and a tick (still a
    follower); 4. n2 asks again. Expected: ALREADY_VOTED: a leader that silent may be dead, and
    the candidate need not wait for this member's own timeout."""
    s = follower_of("n1", 1)
    s.core.vote = "n1"
    out = of_type(s.step(vote_req("n2", "n0", 1)), VoteResponse)
    assert out[0].result is VoteResult.REJECT_ALREADY_HAS_LEADER
    s.ticks((FAST.max_heartbeat_leak - 1) * FAST.heartbeat_interval_ticks + 1)
    assert s.core.role is Role.FOLLOWER
    out = of_type(s.step(vote_req("n2", "n0", 1, rnd=2)), VoteResponse)
    assert out[0].result is VoteResult.REJECT_ALREADY_VOTED


def _lost_leader() -> tuple[Solo, VoteRequest]:
    """A follower of n1 (term 1, voted n1) whose leader fell silent: candidate, and its first
    round in term 1 sent."""
    s = follower_of("n1", 1)
    s.core.vote = "n1"
    s.ticks(FAST.max_heartbeat_leak * FAST.heartbeat_interval_ticks + 1)
    request = of_type(s.ticks(1), VoteRequest)[-1]
    assert (s.core.role, s.core.term) == (Role.CANDIDATE, 1)
    return s, request


def _answer(s: Solo, request: VoteRequest, voter: str, result: VoteResult) -> None:
    s.step(
        VoteResponse(
            from_id=voter,
            to_id="n0",
            term=request.term,
            request_term=request.term,
            vote_round=request.vote_round,
            result=result,
        )
    )


@pytest.mark.parametrize(
    ("answer", "leaderless"),
    [
        (None, False),  # cut off alone: nobody answers
        (VoteResult.REJECT_ALREADY_HAS_LEADER, False),  # the leader lives for n2
        (VoteResult.REJECT_ALREADY_VOTED, True),  # n2 lost it too
        (VoteResult.ACCEPT, True),  # n2 never voted in term 1
    ],
)
def test_raft_candidate_sees_a_leaderless_quorum_only_from_its_answers(
    answer: VoteResult | None, leaderless: bool
) -> None:
    """1. a follower loses its leader n1 and asks n1 and n2 in term 1; 2. n2 answers ``answer``
    (n1, the lost leader, never does). Expected: ``leaderless_quorum`` only when n2's answer
    completes a quorum that names no leader."""
    s, request = _lost_leader()
    assert not s.core.leaderless_quorum()  # its own answer alone is no quorum
    if answer is not None:
        _answer(s, request, "n2", answer)
    assert s.core.leaderless_quorum() is leaderless


def test_raft_member_cut_off_alone_keeps_its_term() -> None:
    """1. a follower loses its leader n1 and nobody answers for 100 intervals. Expected: it
    stays a candidate of term 1 (no evidence, no campaign in a later term); 2. n1's heartbeat
    of term 1 arrives (healed). Expected: n1's follower again, term 1."""
    s, _request = _lost_leader()
    s.ticks(100 * FAST.heartbeat_interval_ticks)
    assert (s.core.role, s.core.term, s.core.leaderless_quorum()) == (Role.CANDIDATE, 1, False)
    s.step(beat("n1", "n0", 1, rnd=5))
    assert (s.core.role, s.core.term, s.core.leader_id) == (Role.FOLLOWER, 1, "n1")
