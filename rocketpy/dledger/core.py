"""Pure Raft with DLedger's election: ``step(msg)``, ``tick()``, ``propose()`` -> ``Ready``.

Owns: :class:`RaftCore`, the deterministic state machine of one group member, its
:class:`RaftConfig` (all times in logical ticks), :class:`Ready` and :class:`Status`, and the
:class:`NotLeader` errors. Must not: do I/O, read clocks or log. Randomness comes only from the
injected ``rng`` (randomized vote intervals), so a seed replays a run exactly.

Mirrors openmessaging/dledger ``DLedgerLeaderElector`` (roles, vote results and candidate
reactions, heartbeats, leadership transfer, preferred leaders), ``DLedgerEntryPusher``
(pipelined, batched replication, quorum commit) and ``MemberState``; shaped like
etcd-io/raft ``raft.go`` (one step function per role) and ``node.go`` (``Ready``/``Advance``).

Driver contract (``dledger/node.py``), for each Ready in order:

1. persist ``snapshot`` (if any), then ``entries``, then ``hard_state`` -- fsynced when
   ``must_sync`` (a vote or an append must be durable before it is acknowledged);
2. restore the state machine from ``snapshot.data`` (if any);
3. send ``messages``;
4. apply ``committed_entries`` in order (NOOP entries carry no data);
5. call :meth:`RaftCore.advance` with the same Ready.

Between ``ready()`` and ``advance()`` the driver may keep calling ``step``/``tick``/``propose``.
At start the driver restores the state machine from ``storage.snapshot()``.

Deviations from DLedger, each safe and noted where it happens: indices are 1-based; the vote
and heartbeat waits run on ticks instead of threads and latches; a push (append) from a higher
term is accepted at once (Raft 5.1) while a heartbeat from a higher term still answers
TERM_NOT_READY as DLedger does; the leader appends a NOOP entry when elected (what
``DLedgerController`` does with its empty event) so earlier terms' entries commit (Raft 5.4.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from rocketpy.common.errors import RocketPyError
from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.election import Backoff, VoterState, VoteTally, decide_vote
from rocketpy.dledger.messages import (
    NO_INDEX,
    AppendRequest,
    AppendResponse,
    Entry,
    EntryKind,
    HardState,
    HeartbeatRequest,
    HeartbeatResponse,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    Message,
    ParseResult,
    ResponseCode,
    Snapshot,
    TakeLeadershipRequest,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from rocketpy.dledger.progress import Progress, ProgressState, quorum_index
from rocketpy.dledger.raft_log import RaftLog
from rocketpy.dledger.storage import LogCompacted, StorageView


class NotLeader(RocketPyError):
    """A write reached a member that is not the leader (DLedger NOT_LEADER).

    Attributes:
        leader_id: the leader this member knows of, or None.
    """

    def __init__(self, node_id: str, leader_id: str | None) -> None:
        self.node_id = node_id
        self.leader_id = leader_id
        super().__init__(f"{node_id} is not the leader (leader: {leader_id})")


class LeadershipTransferring(NotLeader):
    """The leader is handing over and refuses writes (DLedger LEADER_TRANSFERRING)."""


class Role(Enum):
    """DLedger ``MemberState.Role``."""

    CANDIDATE = "candidate"
    FOLLOWER = "follower"
    LEADER = "leader"


class Rng(Protocol):
    """What the core needs from ``random.Random``."""

    def randrange(self, stop: int, /) -> int:
        """A random int in ``[0, stop)``."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RaftConfig:
    """Timing and batching; times in ticks (defaults: DLedger's with a 100 ms tick).

    Attributes:
        heartbeat_interval_ticks: ``heartBeatTimeIntervalMs``.
        max_heartbeat_leak: ``maxHeartBeatLeak``: missed intervals before a follower
            campaigns or a leader without a quorum steps down.
        min_vote_interval_ticks / max_vote_interval_ticks: ``min/maxVoteIntervalMs``, the
            random wait between a candidate's rounds.
        vote_wait_ticks: how long a round waits for responses (DLedger 2000 ms + random).
        max_inflight_appends: appends in flight per follower (pipelining).
        max_entries_per_append / max_append_bytes: batching limits per append.
        max_apply_bytes: committed entries handed out per Ready.
        preferred_leader_ids: ``preferredLeaderIds``: the leader hands over to the first
            of these that is alive and within ``max_transfer_lag`` entries.
        max_transfer_lag: ``maxLeadershipTransferWaitIndex`` (1000).
        transfer_timeout_ticks: a transfer not finished by then is abandoned.
        snapshot_timeout_heartbeats: heartbeats answered while a snapshot is unanswered
            before it is sent again.
        take_leadership_vote_ticks: the vote interval of a member taking leadership
            (``min/maxTakeLeadershipVoteIntervalMs``, 30-100 ms upstream).
    """

    heartbeat_interval_ticks: int = 20
    max_heartbeat_leak: int = 3
    min_vote_interval_ticks: int = 3
    max_vote_interval_ticks: int = 10
    vote_wait_ticks: int = 20
    max_inflight_appends: int = 16
    max_entries_per_append: int = 64
    max_append_bytes: int = 1 << 20
    max_apply_bytes: int = 4 << 20
    preferred_leader_ids: tuple[str, ...] = ()
    max_transfer_lag: int = 1000
    transfer_timeout_ticks: int = 60
    snapshot_timeout_heartbeats: int = 3
    take_leadership_vote_ticks: int = 1

    def __post_init__(self) -> None:
        positive = (
            "heartbeat_interval_ticks",
            "max_heartbeat_leak",
            "vote_wait_ticks",
            "max_inflight_appends",
            "max_entries_per_append",
            "max_append_bytes",
            "max_apply_bytes",
            "transfer_timeout_ticks",
            "snapshot_timeout_heartbeats",
            "take_leadership_vote_ticks",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if not 0 <= self.min_vote_interval_ticks < self.max_vote_interval_ticks:
            raise ValueError("need 0 <= min_vote_interval_ticks < max_vote_interval_ticks")


@dataclass(frozen=True, slots=True, kw_only=True)
class SoftState:
    """Volatile facts the driver reacts to (start/stop serving as the controller leader)."""

    role: Role
    leader_id: str | None
    term: Term


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready:
    """Everything the driver must do now, in the order of the module docstring."""

    hard_state: HardState | None
    entries: tuple[Entry, ...]
    snapshot: Snapshot | None
    committed_entries: tuple[Entry, ...]
    messages: tuple[Message, ...]
    soft_state: SoftState | None
    must_sync: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Status:
    """A read-only view of the core (``statistics()`` of the driver builds on it)."""

    node_id: str
    role: Role
    term: Term
    vote: str | None
    leader_id: str | None
    commit_index: LogIndex
    applied_index: LogIndex
    last_index: LogIndex
    last_term: Term
    term_start_index: LogIndex  # leader: index of its NOOP; 0 otherwise
    transferee: str | None
    last_parse_result: ParseResult


class RaftCore:
    """One member of a DLedger group as a deterministic state machine.

    Args:
        node_id: this member's id (``controllerDLegerSelfId``, e.g. ``n0``).
        peers: every member id, this one included (``controllerDLegerPeers``).
        storage: the persisted state to start from (hard state, snapshot, entries).
        rng: source of the randomized vote intervals.
        config: timings and limits.
    """

    def __init__(
        self,
        node_id: str,
        peers: tuple[str, ...] | list[str],
        storage: StorageView,
        rng: Rng,
        config: RaftConfig | None = None,
    ) -> None:
        if node_id not in peers:
            raise ValueError(f"{node_id} is not among the peers {peers}")
        if len(set(peers)) != len(peers):
            raise ValueError(f"duplicate peer ids in {peers}")
        self.id = node_id
        self.members = tuple(sorted(peers))
        self._member_set = frozenset(self.members)
        self.others = tuple(p for p in self.members if p != node_id)
        self.config = config or RaftConfig()
        self._rng = rng
        self.log = RaftLog(storage)
        hard = storage.hard_state()
        self.term = hard.term
        self.vote = hard.vote
        self._prev_hard = HardState(term=hard.term, vote=hard.vote, commit=self.log.committed)
        self.role = Role.CANDIDATE  # DLedger members start as candidates
        self.leader_id: str | None = None
        self._known_max_term = hard.term
        self._msgs: list[Message] = []
        self._outstanding: Ready | None = None
        self._prev_soft = self._soft_state()
        # follower
        self._leader_silent_ticks = 0
        # candidate (DLedgerLeaderElector's vote bookkeeping)
        self._parse_result = ParseResult.WAIT_TO_REVOTE
        self._vote_timer = 0  # ticks until the next round; DLedger votes at once on start
        self._vote_round = 0
        self._tally: VoteTally | None = None
        self._vote_wait_left = 0
        self._take_leadership_term = Term(-1)
        # leader
        self.progress: dict[str, Progress] = {}
        self._term_start_index = LogIndex(0)
        self._beat_elapsed = 0
        self._beat_round = 0
        self._beat_success: set[str] = set()
        self._beat_not_ready: set[str] = set()
        self._beat_inconsistent = False
        self._ticks_since_quorum = 0
        self._recent_active: set[str] = set()
        self._transferee: str | None = None
        self._transfer_elapsed = 0
        self._broadcast_pending = False

    # ------------------------------------------------------------------------------------------
    # public API

    def tick(self) -> None:
        """Advance logical time by one tick."""
        if self.role is Role.LEADER:
            self._tick_leader()
        elif self.role is Role.FOLLOWER:
            self._tick_follower()
        else:
            self._tick_candidate()

    def step(self, msg: Message) -> None:
        """Handle one message from a peer (stale, duplicated and reordered ones included)."""
        if msg.to_id != self.id:
            return
        if msg.from_id not in self._member_set:
            self._reply_unknown_member(msg)
            return
        if isinstance(msg, VoteRequest):
            self._handle_vote(msg)
        elif isinstance(msg, HeartbeatRequest):
            self._handle_heartbeat(msg)
        elif isinstance(msg, AppendRequest | InstallSnapshotRequest | TakeLeadershipRequest):
            if self._accept_leader_message(msg):
                self._step_follower(msg)
        elif self.role is Role.LEADER:
            self._step_leader(msg)
        elif self.role is Role.CANDIDATE:
            self._step_candidate(msg)
        # a follower ignores responses: they belong to a role it no longer has

    def propose(self, data: bytes) -> LogIndex:
        """Append ``data`` as a new entry of the current term; returns its index.

        Raises:
            NotLeader: this member is not the leader.
            LeadershipTransferring: a leadership transfer is under way.
        """
        if self.role is not Role.LEADER:
            raise NotLeader(self.id, self.leader_id)
        if self._transferee is not None:
            raise LeadershipTransferring(self.id, self.id)
        index = LogIndex(self.log.last_index() + 1)
        self.log.append([Entry(term=self.term, index=index, data=data)])
        self._broadcast_pending = True
        self._maybe_commit()
        return index

    def campaign(self) -> None:
        """Start a vote round in the next term now (DLedger ``testRevote``; tests, tools)."""
        if self.role is Role.LEADER:
            return
        self._become_candidate(self.term)
        self._parse_result = ParseResult.WAIT_TO_VOTE_NEXT
        self._maintain_as_candidate()

    def transfer_leadership(self, target: str) -> None:
        """Hand leadership to ``target`` once it has caught up (``handleLeadershipTransfer``).

        Raises:
            NotLeader: this member is not the leader.
            ValueError: ``target`` is not a member.
        """
        if self.role is not Role.LEADER:
            raise NotLeader(self.id, self.leader_id)
        if target not in self._member_set:
            raise ValueError(f"{target} is not a member")
        if target in (self.id, self._transferee):
            return
        self._transferee = target
        self._transfer_elapsed = 0
        self._advance_transfer(target)

    def has_ready(self) -> bool:
        """Is there anything for the driver to do?"""
        self._flush_broadcast()
        return bool(
            self._msgs
            or self.log.unstable.entries
            or self.log.unstable.snapshot is not None
            or self.log.has_next_committed()
            or self._hard_state() != self._prev_hard
            or self._soft_state() != self._prev_soft
        )

    def ready(self) -> Ready:
        """Collect the work for the driver (see the module docstring).

        Raises:
            RuntimeError: the previous Ready was not advanced.
        """
        if self._outstanding is not None:
            raise RuntimeError("advance() the previous Ready first")
        self._flush_broadcast()
        hard = self._hard_state()
        soft = self._soft_state()
        entries = tuple(self.log.unstable.entries)
        snapshot = self.log.unstable.snapshot
        hard_changed = hard != self._prev_hard
        vote_changed = hard.term != self._prev_hard.term or hard.vote != self._prev_hard.vote
        rd = Ready(
            hard_state=hard if hard_changed else None,
            entries=entries,
            snapshot=snapshot,
            committed_entries=tuple(self.log.next_committed(self.config.max_apply_bytes)),
            messages=tuple(self._msgs),
            soft_state=soft if soft != self._prev_soft else None,
            must_sync=bool(entries) or snapshot is not None or vote_changed,
        )
        self._msgs = []
        self._outstanding = rd
        return rd

    def advance(self, rd: Ready) -> None:
        """The driver finished ``rd``: persisted, sent and applied."""
        if rd is not self._outstanding:
            raise RuntimeError("advance() must get the Ready returned by ready()")
        self._outstanding = None
        if rd.hard_state is not None:
            self._prev_hard = rd.hard_state
        if rd.soft_state is not None:
            self._prev_soft = rd.soft_state
        if rd.snapshot is not None:
            self.log.stable_snapshot_to(rd.snapshot.meta.index)
            self.log.applied = max(self.log.applied, rd.snapshot.meta.index)
        if rd.entries:
            last = rd.entries[-1]
            self.log.stable_to(last.index, last.term)
        if rd.committed_entries:
            self.log.applied_to(rd.committed_entries[-1].index)

    def status(self) -> Status:
        """A snapshot of the core's state."""
        return Status(
            node_id=self.id,
            role=self.role,
            term=self.term,
            vote=self.vote,
            leader_id=self.leader_id,
            commit_index=self.log.committed,
            applied_index=self.log.applied,
            last_index=self.log.last_index(),
            last_term=self.log.last_term(),
            term_start_index=self._term_start_index if self.role is Role.LEADER else LogIndex(0),
            transferee=self._transferee,
            last_parse_result=self._parse_result,
        )

    # ------------------------------------------------------------------------------------------
    # state changes

    def _hard_state(self) -> HardState:
        return HardState(term=self.term, vote=self.vote, commit=self.log.committed)

    def _soft_state(self) -> SoftState:
        return SoftState(role=self.role, leader_id=self.leader_id, term=self.term)

    def _reset_role(self) -> None:
        self.leader_id = None
        self._tally = None
        self.progress = {}
        self._transferee = None
        self._broadcast_pending = False
        self._term_start_index = LogIndex(0)

    def _become_follower(self, term: Term, leader_id: str) -> None:
        """DLedger ``changeRoleToFollower``: a new term forgets the vote."""
        if term != self.term:
            self.term = term
            self.vote = None
        self._known_max_term = Term(max(self._known_max_term, term))
        self._reset_role()
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self._leader_silent_ticks = 0
        self._parse_result = ParseResult.WAIT_TO_REVOTE
        if self._take_leadership_term <= term:
            self._take_leadership_term = Term(-1)

    def _become_candidate(self, term: Term) -> None:
        """DLedger ``changeRoleToCandidate``: remember a higher term, keep currTerm for now."""
        self._known_max_term = Term(max(self._known_max_term, term))
        self._reset_role()
        self.role = Role.CANDIDATE

    def _step_up_to(self, term: Term) -> None:
        """A higher term was seen: become a candidate there without voting yet.

        DLedger sets ``needIncreaseTermImmediately`` and its maintainer thread moves currTerm to
        ``knownMaxTermInGroup`` within 10 ms, then waits a random vote interval; done at once.
        """
        self._become_candidate(term)
        self._next_term()
        self._parse_result = ParseResult.WAIT_TO_REVOTE
        self._vote_timer = self._vote_interval()

    def _next_term(self) -> None:
        """DLedger ``MemberState.nextTerm``: jump to the largest known term, or add one."""
        if self._known_max_term > self.term:
            self.term = self._known_max_term
        else:
            self.term = Term(self.term + 1)
        self.vote = None
        if self._take_leadership_term < self.term:
            self._take_leadership_term = Term(-1)

    def _become_leader(self) -> None:
        """DLedger ``changeRoleToLeader``; appends the NOOP entry and heartbeats at once."""
        self._reset_role()
        self.role = Role.LEADER
        self.leader_id = self.id
        self._take_leadership_term = Term(-1)
        last = self.log.last_index()
        self.progress = {
            p: Progress(match=LogIndex(0), next=LogIndex(last + 1)) for p in self.others
        }
        self._term_start_index = LogIndex(last + 1)
        self.log.append([Entry(term=self.term, index=self._term_start_index, kind=EntryKind.NOOP)])
        self._ticks_since_quorum = 0
        self._recent_active = set()
        self._send_heartbeats()
        self._broadcast_pending = True
        self._maybe_commit()

    # ------------------------------------------------------------------------------------------
    # ticks

    def _tick_follower(self) -> None:
        # DLedger maintainAsFollower: no heartbeat for maxHeartBeatLeak intervals -> candidate.
        self._leader_silent_ticks += 1
        limit = self.config.max_heartbeat_leak * self.config.heartbeat_interval_ticks
        if self._leader_silent_ticks > limit:
            self._become_candidate(self.term)
            self._vote_timer = 0

    def _tick_candidate(self) -> None:
        if self._tally is not None:
            self._vote_wait_left -= 1
            if self._vote_wait_left <= 0:
                self._finish_round()
            return
        self._vote_timer -= 1
        if self._vote_timer <= 0:
            self._maintain_as_candidate()

    def _tick_leader(self) -> None:
        self._ticks_since_quorum += 1
        if self._transferee is not None:
            self._transfer_elapsed += 1
            if self._transfer_elapsed > self.config.transfer_timeout_ticks:
                self._transferee = None  # abandoned; writes resume
        self._beat_elapsed += 1
        if self._beat_elapsed >= self.config.heartbeat_interval_ticks:
            self._evaluate_beat_round()
            if self.role is Role.LEADER:
                self._send_heartbeats()
                self._check_preferred_leader()

    # ------------------------------------------------------------------------------------------
    # elections

    def _vote_interval(self) -> int:
        """DLedger ``getNextTimeToRequestVote``: min + random(max - min)."""
        cfg = self.config
        if self._take_leadership_term == self.term:
            return cfg.take_leadership_vote_ticks
        spread = cfg.max_vote_interval_ticks - cfg.min_vote_interval_ticks
        return cfg.min_vote_interval_ticks + self._rng.randrange(spread)

    def _voter_state(self) -> VoterState:
        return VoterState(
            self_id=self.id,
            members=self._member_set,
            term=self.term,
            voted_for=self.vote,
            leader_id=self.leader_id,
            ledger_end_term=self.log.last_term(),
            ledger_end_index=self.log.last_index(),
            taking_leadership=self._take_leadership_term == self.term,
        )

    def _maintain_as_candidate(self) -> None:
        """DLedger ``maintainAsCandidate``: maybe move to the next term, then ask for votes."""
        if self._parse_result is ParseResult.WAIT_TO_VOTE_NEXT:
            self._next_term()
            self._parse_result = ParseResult.WAIT_TO_REVOTE
        self._start_round()

    def _start_round(self) -> None:
        self._vote_round += 1
        self._tally = VoteTally(term=self.term, members=len(self.members))
        self._vote_wait_left = self.config.vote_wait_ticks + self._rng.randrange(
            self.config.max_vote_interval_ticks
        )
        request = VoteRequest(
            from_id=self.id,
            to_id=self.id,
            term=self.term,
            ledger_end_term=self.log.last_term(),
            ledger_end_index=self.log.last_index(),
            vote_round=self._vote_round,
        )
        own = decide_vote(self._voter_state(), request, is_self=True)
        if own is VoteResult.ACCEPT:
            self.vote = self.id
        self._tally.add(self.id, own, self.term)
        for peer in self.others:
            self._send(
                VoteRequest(
                    from_id=self.id,
                    to_id=peer,
                    term=request.term,
                    ledger_end_term=request.ledger_end_term,
                    ledger_end_index=request.ledger_end_index,
                    vote_round=request.vote_round,
                )
            )
        if self._tally.is_decided():
            self._finish_round()

    def _finish_round(self) -> None:
        tally = self._tally
        if tally is None:
            return
        self._tally = None
        result, backoff = tally.parse()
        self._parse_result = result
        if result is ParseResult.PASSED:
            if tally.term == self.term:
                self._become_leader()
            return
        if result is ParseResult.REVOTE_IMMEDIATELY:
            self._start_round()
            return
        wait = self._vote_interval()
        if backoff is Backoff.LEADER_LEASE:
            wait += self.config.heartbeat_interval_ticks * self.config.max_heartbeat_leak
        elif backoff is Backoff.BIGGER_LEDGER:
            wait += self.config.max_vote_interval_ticks
        self._vote_timer = wait
        if tally.known_max_term > tally.term:
            self._become_candidate(tally.known_max_term)

    def _handle_vote(self, req: VoteRequest) -> None:
        """DLedger ``handleVote`` (see :func:`decide_vote` for the order of checks)."""
        result = decide_vote(self._voter_state(), req, is_self=False)
        term = self.term
        if result is VoteResult.REJECT_TERM_NOT_READY:
            self._step_up_to(req.term)
            term = self.term
        elif result is VoteResult.REJECT_TERM_SMALL_THAN_LEDGER:
            term = self.log.last_term()
        elif result is VoteResult.ACCEPT:
            self.vote = req.from_id  # persisted (Ready.hard_state) before the response leaves
        self._send(
            VoteResponse(
                from_id=self.id,
                to_id=req.from_id,
                term=term,
                request_term=req.term,
                vote_round=req.vote_round,
                result=result,
            )
        )

    def _step_candidate(self, msg: Message) -> None:
        if not isinstance(msg, VoteResponse):
            return
        tally = self._tally
        if tally is None or msg.vote_round != self._vote_round or msg.request_term != self.term:
            return  # a response to an earlier round
        tally.add(msg.from_id, msg.result, msg.term)
        if tally.is_decided():
            self._finish_round()

    # ------------------------------------------------------------------------------------------
    # heartbeats (DLedger handleHeartBeat / sendHeartbeats)

    def _handle_heartbeat(self, req: HeartbeatRequest) -> None:
        code = ResponseCode.SUCCESS
        if req.from_id == self.id:
            code = ResponseCode.UNEXPECTED_MEMBER
        elif req.term < self.term:
            code = ResponseCode.EXPIRED_TERM
        elif req.term > self.term:
            # DLedger: "for larger term, do not change to follower immediately".
            self._step_up_to(req.term)
            code = ResponseCode.TERM_NOT_READY
        elif self.leader_id is None:
            self._become_follower(req.term, req.from_id)
        elif self.leader_id != req.from_id:
            code = ResponseCode.INCONSISTENT_LEADER
        if code is ResponseCode.SUCCESS:
            self._leader_silent_ticks = 0
            self.log.commit_to(LogIndex(min(req.commit_index, self.log.last_index())))
        self._send(
            HeartbeatResponse(
                from_id=self.id,
                to_id=req.from_id,
                term=self.term,
                beat_round=req.beat_round,
                code=code,
            )
        )

    def _send_heartbeats(self) -> None:
        self._beat_elapsed = 0
        self._beat_round += 1
        self._beat_success = {self.id}
        self._beat_not_ready = set()
        self._beat_inconsistent = False
        for peer in self.others:
            pr = self.progress[peer]
            self._send(
                HeartbeatRequest(
                    from_id=self.id,
                    to_id=peer,
                    term=self.term,
                    commit_index=LogIndex(min(pr.match, self.log.committed)),
                    beat_round=self._beat_round,
                )
            )

    def _evaluate_beat_round(self) -> None:
        """DLedger ``sendHeartbeats`` tail: quorum kept, re-beat at once, or step down."""
        quorum = len(self.members) // 2 + 1
        self._recent_active = set(self._beat_success)
        if len(self._beat_success) >= quorum:
            self._ticks_since_quorum = 0
            return
        limit = self.config.max_heartbeat_leak * self.config.heartbeat_interval_ticks
        if len(self._beat_success | self._beat_not_ready) >= quorum:
            return  # some peers just moved to our term: the next beat goes out now anyway
        if self._beat_inconsistent or self._ticks_since_quorum > limit:
            self._become_candidate(self.term)
            self._vote_timer = 0

    def _on_heartbeat_response(self, resp: HeartbeatResponse) -> None:
        if resp.term > self.term:
            self._become_candidate(resp.term)  # EXPIRED_TERM: someone is in a later term
            self._parse_result = ParseResult.WAIT_TO_VOTE_NEXT
            self._vote_timer = self._vote_interval()
            return
        if resp.beat_round != self._beat_round or resp.term != self.term:
            return
        if resp.code is ResponseCode.SUCCESS:
            self._beat_success.add(resp.from_id)
            self._resume(resp.from_id)
        elif resp.code is ResponseCode.TERM_NOT_READY:
            self._beat_not_ready.add(resp.from_id)
        elif resp.code is ResponseCode.INCONSISTENT_LEADER:
            self._beat_inconsistent = True

    def _resume(self, peer: str) -> None:
        """A follower answered a heartbeat: unblock its replication if it lags."""
        pr = self.progress[peer]
        if pr.state is ProgressState.SNAPSHOT:
            pr.snapshot_wait += 1
            if pr.snapshot_wait >= self.config.snapshot_timeout_heartbeats:
                pr.become_probe()  # the snapshot (or its answer) was lost: start over
        elif pr.state is ProgressState.PROBE:
            pr.probe_sent = False
        elif len(pr.inflight) >= self.config.max_inflight_appends:
            pr.free_one()
        if pr.match < self.log.last_index():
            self._send_append(peer, allow_empty=True)

    # ------------------------------------------------------------------------------------------
    # replication, leader side

    def _step_leader(self, msg: Message) -> None:
        if isinstance(msg, HeartbeatResponse):
            self._on_heartbeat_response(msg)
            return
        if not isinstance(msg, AppendResponse | InstallSnapshotResponse):
            return
        if msg.term > self.term:
            self._step_up_to(msg.term)
            return
        if msg.term < self.term:
            return  # an answer to an earlier term's leader
        pr = self.progress[msg.from_id]
        if isinstance(msg, InstallSnapshotResponse):
            if msg.code is ResponseCode.SUCCESS:
                pr.maybe_update(msg.index)
                pr.become_probe()
        elif msg.code is ResponseCode.INCONSISTENT_STATE:
            if pr.maybe_decrement(msg.index, msg.hint):
                self._send_append(msg.from_id)
            return
        elif msg.code is ResponseCode.SUCCESS and pr.maybe_update(msg.index):
            if pr.state is ProgressState.PROBE:
                pr.become_replicate()
            self._maybe_commit()
        self._send_appends(msg.from_id)
        if msg.from_id == self._transferee:
            self._advance_transfer(msg.from_id)

    def _maybe_commit(self) -> None:
        # Raft 5.4.2: only count replicas for entries of the current term.
        matches = [self.log.last_index()] + [pr.match for pr in self.progress.values()]
        self.log.maybe_commit(quorum_index(matches), self.term)

    def _flush_broadcast(self) -> None:
        if self._broadcast_pending and self.role is Role.LEADER:
            for peer in self.others:
                self._send_appends(peer)
        self._broadcast_pending = False

    def _send_appends(self, peer: str) -> None:
        """Send as many batched appends as the follower's window allows (pipelining)."""
        while self._send_append(peer):
            if self.progress[peer].state is not ProgressState.REPLICATE:
                break

    def _send_append(self, peer: str, *, allow_empty: bool = False) -> bool:
        pr = self.progress[peer]
        if pr.is_paused(self.config.max_inflight_appends):
            return False
        prev = LogIndex(pr.next - 1)
        prev_term = self.log.term_or_none(prev)
        hi = LogIndex(min(self.log.last_index() + 1, pr.next + self.config.max_entries_per_append))
        try:
            entries = self.log.slice(pr.next, hi, self.config.max_append_bytes)
        except LogCompacted:
            prev_term = None
        if prev_term is None:
            self._send_snapshot(peer)
            return False
        if not entries and not allow_empty:
            return False
        self._send(
            AppendRequest(
                from_id=self.id,
                to_id=peer,
                term=self.term,
                prev_index=prev,
                prev_term=prev_term,
                entries=tuple(entries),
                commit_index=self.log.committed,
            )
        )
        pr.sent(LogIndex(prev + len(entries)), len(entries))
        return bool(entries)

    def _send_snapshot(self, peer: str) -> None:
        snapshot = self.log.unstable.snapshot or self.log.storage.snapshot()
        pr = self.progress[peer]
        pr.become_snapshot(snapshot.meta.index)
        self._send(
            InstallSnapshotRequest(
                from_id=self.id,
                to_id=peer,
                term=self.term,
                meta=snapshot.meta,
                data=snapshot.data,
            )
        )

    # ------------------------------------------------------------------------------------------
    # leadership transfer and preferred leaders

    def _advance_transfer(self, target: str) -> None:
        """Send TakeLeadership once the transferee holds our whole log (seed 002)."""
        pr = self.progress[target]
        if pr.match >= self.log.last_index():
            self._send(
                TakeLeadershipRequest(
                    from_id=self.id,
                    to_id=target,
                    term=self.term,
                    ledger_end_index=self.log.last_index(),
                )
            )
        else:
            self._send_appends(target)

    def _check_preferred_leader(self) -> None:
        """DLedgerServer ``checkPreferredLeader``: hand over to a caught-up preferred member."""
        preferred = self.config.preferred_leader_ids
        if not preferred or self.id in preferred or self._transferee is not None:
            return
        for candidate in preferred:
            if candidate not in self.progress or candidate not in self._recent_active:
                continue
            lag = self.log.last_index() - self.progress[candidate].match
            if lag <= self.config.max_transfer_lag:
                self.transfer_leadership(candidate)
                return

    # ------------------------------------------------------------------------------------------
    # follower side

    def _accept_leader_message(
        self, msg: AppendRequest | InstallSnapshotRequest | TakeLeadershipRequest
    ) -> bool:
        """Term and leader checks shared by every leader -> follower request."""
        if msg.term < self.term:
            self._reject_leader_message(msg, ResponseCode.EXPIRED_TERM)
            return False
        if msg.term > self.term or self.leader_id is None:
            # Raft 5.1: the sender is that term's only leader (a leader's leader_id is itself,
            # so a second leader in one term falls through to INCONSISTENT_LEADER).
            self._become_follower(msg.term, msg.from_id)
        elif self.leader_id != msg.from_id:
            self._reject_leader_message(msg, ResponseCode.INCONSISTENT_LEADER)
            return False
        self._leader_silent_ticks = 0
        return True

    def _reject_leader_message(
        self,
        msg: AppendRequest | InstallSnapshotRequest | TakeLeadershipRequest,
        code: ResponseCode,
    ) -> None:
        if isinstance(msg, AppendRequest):
            self._send(self._append_response(msg.from_id, code, LogIndex(0)))
        elif isinstance(msg, InstallSnapshotRequest):
            self._send(self._snapshot_response(msg.from_id, code))

    def _step_follower(self, msg: Message) -> None:
        if isinstance(msg, AppendRequest):
            self._on_append(msg)
        elif isinstance(msg, InstallSnapshotRequest):
            self._on_install_snapshot(msg)
        elif isinstance(msg, TakeLeadershipRequest):
            self._on_take_leadership(msg)

    def _on_append(self, req: AppendRequest) -> None:
        log = self.log
        if req.prev_index < log.committed:
            # Everything up to our commit index matches the leader (Leader Completeness).
            self._send(self._append_response(req.from_id, ResponseCode.SUCCESS, log.committed))
            return
        last_new = log.maybe_append(req.prev_index, req.prev_term, req.commit_index, req.entries)
        if last_new is not None:
            self._send(self._append_response(req.from_id, ResponseCode.SUCCESS, last_new))
            return
        hint = LogIndex(min(req.prev_index, log.last_index()))
        self._send(
            self._append_response(
                req.from_id, ResponseCode.INCONSISTENT_STATE, req.prev_index, hint
            )
        )

    def _append_response(
        self, to: str, code: ResponseCode, index: LogIndex, hint: LogIndex = NO_INDEX
    ) -> AppendResponse:
        return AppendResponse(
            from_id=self.id, to_id=to, term=self.term, code=code, index=index, hint=hint
        )

    def _snapshot_response(self, to: str, code: ResponseCode) -> InstallSnapshotResponse:
        return InstallSnapshotResponse(
            from_id=self.id, to_id=to, term=self.term, code=code, index=self.log.committed
        )

    def _on_install_snapshot(self, req: InstallSnapshotRequest) -> None:
        meta = req.meta
        if meta.index > self.log.committed:
            if self.log.match_term(meta.index, meta.term):
                self.log.commit_to(meta.index)  # we already hold that prefix
            else:
                self.log.restore(Snapshot(meta=meta, data=req.data))
        self._send(self._snapshot_response(req.from_id, ResponseCode.SUCCESS))

    def _on_take_leadership(self, req: TakeLeadershipRequest) -> None:
        """DLedger ``handleTakeLeadership``: move to term + 1 and campaign after the short
        take-leadership interval; until then the vote is free, so rival candidates of that term
        get REJECT_TAKING_LEADERSHIP."""
        target = Term(req.term + 1)
        self._take_leadership_term = target
        self._step_up_to(target)

    # ------------------------------------------------------------------------------------------
    # plumbing

    def _send(self, msg: Message) -> None:
        self._msgs.append(msg)

    def _reply_unknown_member(self, msg: Message) -> None:
        if isinstance(msg, VoteRequest):
            result = VoteResult.REJECT_UNKNOWN_LEADER
            self._send(
                VoteResponse(
                    from_id=self.id,
                    to_id=msg.from_id,
                    term=self.term,
                    request_term=msg.term,
                    vote_round=msg.vote_round,
                    result=result,
                )
            )
        elif isinstance(msg, HeartbeatRequest):
            self._send(
                HeartbeatResponse(
                    from_id=self.id,
                    to_id=msg.from_id,
                    term=self.term,
                    beat_round=msg.beat_round,
                    code=ResponseCode.UNKNOWN_MEMBER,
                )
            )
