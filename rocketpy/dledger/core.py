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

from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.core_types import (
    LeadershipTransferring,
    NotLeader,
    RaftConfig,
    Ready,
    Rng,
    Role,
    SoftState,
    Status,
)
from rocketpy.dledger.election import Backoff, VoteTally, decide_vote
from rocketpy.dledger.messages import (
    AppendRequest,
    AppendResponse,
    Entry,
    EntryKind,
    HeartbeatRequest,
    HeartbeatResponse,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    Message,
    ParseResult,
    ResponseCode,
    TakeLeadershipRequest,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from rocketpy.dledger.progress import Progress
from rocketpy.dledger.replication import Replication

__all__ = [
    "LeadershipTransferring",
    "NotLeader",
    "RaftConfig",
    "RaftCore",
    "Ready",
    "Rng",
    "Role",
    "SoftState",
    "Status",
]


class RaftCore(Replication):
    """One member of a DLedger group as a deterministic state machine.

    Args:
        node_id: this member's id (``controllerDLegerSelfId``, e.g. ``n0``).
        peers: every member id, this one included (``controllerDLegerPeers``).
        storage: the persisted state to start from (hard state, snapshot, entries).
        rng: source of the randomized vote intervals.
        config: timings and limits.
    """

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
            if isinstance(msg, HeartbeatResponse):
                self._on_heartbeat_response(msg)
            elif isinstance(msg, AppendResponse | InstallSnapshotResponse):
                self._on_replication_response(msg)
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

    def leaderless_quorum(self) -> bool:
        """Whether this candidate's latest vote round in its current term heard from a quorum
        (itself included) and none of them follows a live leader (:meth:`_live_leader`).

        The driver's fast failover campaigns in the next term only on this evidence: a
        member cut off alone never has it, so it stays in its term and, once healed, follows
        the leader's next heartbeat instead of moving everyone to a new term (what PreVote
        does in etcd-io/raft, here without a new message). A follower that never voted in
        the term accepts the probe instead of naming its leader; a candidate that reaches
        only such a follower may still campaign, as before.
        """
        tally = self._last_tally
        return (
            self.role is Role.CANDIDATE
            and tally is not None
            and tally.term == self.term
            and tally.leaderless_quorum()
        )

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
        self._start_transfer(target)

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

    def _maintain_as_candidate(self) -> None:
        """DLedger ``maintainAsCandidate``: maybe move to the next term, then ask for votes."""
        if self._parse_result is ParseResult.WAIT_TO_VOTE_NEXT:
            self._next_term()
            self._parse_result = ParseResult.WAIT_TO_REVOTE
        self._start_round()

    def _start_round(self) -> None:
        self._vote_round += 1
        self._tally = self._last_tally = VoteTally(term=self.term, members=len(self.members))
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
