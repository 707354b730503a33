"""DLedger's election rules as pure functions: how a voter answers, how a candidate tallies.

Owns: :func:`decide_vote` (``DLedgerLeaderElector.handleVote``, check for check in upstream
order) and :class:`VoteTally` (the response counting and ``ParseResult`` decision of
``maintainAsCandidate``). Must not: change any state; :mod:`rocketpy.dledger.core` applies the
effects (record the vote, step to a higher term).

``decide_vote`` order (seed 001, "other nodes handling a vote request"):

1. candidate not a member -> REJECT_UNKNOWN_LEADER; a remote request naming me ->
   REJECT_UNEXPECTED_LEADER;
2. Raft 5.4.1 election restriction, checked *before* the term: request ledgerEndTerm smaller ->
   REJECT_EXPIRED_LEDGER_TERM; equal with a smaller ledgerEndIndex -> REJECT_SMALL_LEDGER_END_INDEX;
3. request term smaller -> REJECT_EXPIRED_VOTE_TERM; equal and already voted for someone else ->
   REJECT_ALREADY_HAS_LEADER if I know a leader, else REJECT_ALREADY_VOTED; larger ->
   REJECT_TERM_NOT_READY (the voter moves to that term and the candidate re-asks at once);
4. request term below my ledgerEndTerm -> REJECT_TERM_SMALL_THAN_LEDGER;
5. I am taking leadership (a transfer made me campaign in this term) and my log is at least as
   long with the same ledgerEndTerm -> REJECT_TAKING_LEADERSHIP;
6. ACCEPT (the core records the vote durably before the response leaves).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.messages import NO_TERM, ParseResult, VoteRequest, VoteResult


@dataclass(frozen=True, slots=True, kw_only=True)
class VoterState:
    """What a voter consults (DLedger ``MemberState``)."""

    self_id: str
    members: frozenset[str]
    term: Term
    voted_for: str | None
    leader_id: str | None
    ledger_end_term: Term
    ledger_end_index: LogIndex
    taking_leadership: bool


def decide_vote(state: VoterState, request: VoteRequest, *, is_self: bool) -> VoteResult:
    """The answer to ``request`` (module docstring lists the checks in order)."""
    candidate = request.from_id
    result = _membership(state, candidate, is_self=is_self)
    if result is None:
        result = _ledger(state, request)
    if result is None:
        result = _term(state, request)
    if result is None and request.term < state.ledger_end_term:
        result = VoteResult.REJECT_TERM_SMALL_THAN_LEDGER
    if (
        result is None
        and not is_self
        and state.taking_leadership
        and request.ledger_end_term == state.ledger_end_term
        and state.ledger_end_index >= request.ledger_end_index
    ):
        result = VoteResult.REJECT_TAKING_LEADERSHIP
    return VoteResult.ACCEPT if result is None else result


def _membership(state: VoterState, candidate: str, *, is_self: bool) -> VoteResult | None:
    if candidate not in state.members:
        return VoteResult.REJECT_UNKNOWN_LEADER
    if not is_self and candidate == state.self_id:
        return VoteResult.REJECT_UNEXPECTED_LEADER
    return None


def _ledger(state: VoterState, request: VoteRequest) -> VoteResult | None:
    # Raft 5.4.1: only a candidate whose log is at least as up to date gets the vote.
    if request.ledger_end_term < state.ledger_end_term:
        return VoteResult.REJECT_EXPIRED_LEDGER_TERM
    if (
        request.ledger_end_term == state.ledger_end_term
        and request.ledger_end_index < state.ledger_end_index
    ):
        return VoteResult.REJECT_SMALL_LEDGER_END_INDEX
    return None


def _term(state: VoterState, request: VoteRequest) -> VoteResult | None:
    if request.term < state.term:
        return VoteResult.REJECT_EXPIRED_VOTE_TERM
    if request.term > state.term:
        return VoteResult.REJECT_TERM_NOT_READY
    if state.voted_for is None or state.voted_for == request.from_id:
        return None
    if state.leader_id is not None:
        return VoteResult.REJECT_ALREADY_HAS_LEADER
    return VoteResult.REJECT_ALREADY_VOTED


class Backoff(Enum):
    """How long a candidate waits before its next round (``nextTimeToRequestVote``)."""

    NONE = "none"  # PASSED, or REVOTE_IMMEDIATELY
    VOTE_INTERVAL = "vote_interval"  # a random vote interval
    LEADER_LEASE = "leader_lease"  # + heartbeat interval x maxHeartBeatLeak: a leader exists
    BIGGER_LEDGER = "bigger_ledger"  # + maxVoteIntervalMs: many peers have longer logs


@dataclass(slots=True)
class VoteTally:
    """One vote round of a candidate in ``term`` (``maintainAsCandidate``'s counters)."""

    term: Term
    members: int
    all_num: int = 0
    valid_num: int = 0
    accepted_num: int = 0
    not_ready_term_num: int = 0
    bigger_ledger_num: int = 0
    already_has_leader: bool = False
    known_max_term: Term = NO_TERM
    voters: set[str] = field(default_factory=set)  # a duplicated response counts once

    def __post_init__(self) -> None:
        self.known_max_term = Term(max(self.known_max_term, self.term))

    def is_quorum(self, num: int) -> bool:
        """DLedger ``MemberState.isQuorum``: ``num >= members / 2 + 1``."""
        return num >= self.members // 2 + 1

    def add(self, voter: str, result: VoteResult, response_term: Term) -> None:
        """Count ``voter``'s response once (a result of UNKNOWN is not a valid answer)."""
        if voter in self.voters:
            return
        self.voters.add(voter)
        self.all_num += 1
        if result is not VoteResult.UNKNOWN:
            self.valid_num += 1
        if result is VoteResult.ACCEPT:
            self.accepted_num += 1
        elif result is VoteResult.REJECT_ALREADY_HAS_LEADER:
            self.already_has_leader = True
        elif result in (
            VoteResult.REJECT_TERM_SMALL_THAN_LEDGER,
            VoteResult.REJECT_EXPIRED_VOTE_TERM,
        ):
            self.known_max_term = Term(max(self.known_max_term, response_term))
        elif result in (
            VoteResult.REJECT_EXPIRED_LEDGER_TERM,
            VoteResult.REJECT_SMALL_LEDGER_END_INDEX,
        ):
            self.bigger_ledger_num += 1
        elif result is VoteResult.REJECT_TERM_NOT_READY:
            self.not_ready_term_num += 1

    def leaderless_quorum(self) -> bool:
        """Did a quorum answer (this candidate's own answer included) with none of them
        following a live leader? The evidence a candidate needs before it campaigns in the
        next term without waiting (:meth:`rocketpy.dledger.core.RaftCore.leaderless_quorum`)."""
        return self.is_quorum(self.valid_num) and not self.already_has_leader

    def is_decided(self) -> bool:
        """May the candidate stop waiting (the ``voteLatch`` count-down conditions)?"""
        return (
            self.already_has_leader
            or self.is_quorum(self.accepted_num)
            or self.is_quorum(self.accepted_num + self.not_ready_term_num)
            or self.all_num >= self.members
        )

    def parse(self) -> tuple[ParseResult, Backoff]:
        """The round's outcome and how long to wait, checked in ``maintainAsCandidate``'s order."""
        if self.known_max_term > self.term:
            return ParseResult.WAIT_TO_VOTE_NEXT, Backoff.VOTE_INTERVAL
        if self.already_has_leader:
            return ParseResult.WAIT_TO_REVOTE, Backoff.LEADER_LEASE
        if not self.is_quorum(self.valid_num):
            return ParseResult.WAIT_TO_REVOTE, Backoff.VOTE_INTERVAL
        if not self.is_quorum(self.valid_num - self.bigger_ledger_num):
            return ParseResult.WAIT_TO_REVOTE, Backoff.BIGGER_LEDGER
        if self.is_quorum(self.accepted_num):
            return ParseResult.PASSED, Backoff.NONE
        if self.is_quorum(self.accepted_num + self.not_ready_term_num):
            return ParseResult.REVOTE_IMMEDIATELY, Backoff.NONE
        return ParseResult.WAIT_TO_VOTE_NEXT, Backoff.VOTE_INTERVAL
