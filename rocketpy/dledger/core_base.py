"""State and role transitions shared by the parts of the Raft core.

Owns: :class:`CoreBase`: every field of a member (term, vote, role, log, timers, leader
bookkeeping), the DLedger role changes (``changeRoleToFollower``/``Candidate``,
``MemberState.nextTerm``) and the outbox. Must not: do I/O. :mod:`rocketpy.dledger.replication`
and :mod:`rocketpy.dledger.core` build on it; read them together.
"""

from __future__ import annotations

from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.core_types import RaftConfig, Ready, Rng, Role, SoftState
from rocketpy.dledger.election import VoterState, VoteTally
from rocketpy.dledger.messages import HardState, Message, ParseResult
from rocketpy.dledger.progress import Progress
from rocketpy.dledger.raft_log import RaftLog
from rocketpy.dledger.storage import StorageView


class CoreBase:
    """Fields and role transitions of one member (see :class:`~rocketpy.dledger.core.RaftCore`)."""

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
        self._last_tally: VoteTally | None = None  # the latest round's, kept after it ends
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

    def _hard_state(self) -> HardState:
        return HardState(term=self.term, vote=self.vote, commit=self.log.committed)

    def _soft_state(self) -> SoftState:
        return SoftState(role=self.role, leader_id=self.leader_id, term=self.term)

    def _reset_role(self) -> None:
        self.leader_id = None
        self._tally = None
        self._last_tally = None
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

    def _vote_interval(self) -> int:
        """DLedger ``getNextTimeToRequestVote``: min + random(max - min)."""
        cfg = self.config
        if self._take_leadership_term == self.term:
            return cfg.take_leadership_vote_ticks
        spread = cfg.max_vote_interval_ticks - cfg.min_vote_interval_ticks
        return cfg.min_vote_interval_ticks + self._rng.randrange(spread)

    def _live_leader(self) -> str | None:
        """The leader this member follows, if it heard from it lately: a follower silent for
        more than ``max_heartbeat_leak - 1`` intervals answers votes as one without a leader
        (ALREADY_VOTED, not ALREADY_HAS_LEADER), so the first survivor of a dead leader need
        not wait for the others' own timeouts (see ``RaftCore.leaderless_quorum``)."""
        cfg = self.config
        stale = (cfg.max_heartbeat_leak - 1) * cfg.heartbeat_interval_ticks
        if self.role is Role.FOLLOWER and self._leader_silent_ticks > stale:
            return None
        return self.leader_id

    def _voter_state(self) -> VoterState:
        return VoterState(
            self_id=self.id,
            members=self._member_set,
            term=self.term,
            voted_for=self.vote,
            leader_id=self._live_leader(),
            ledger_end_term=self.log.last_term(),
            ledger_end_index=self.log.last_index(),
            taking_leadership=self._take_leadership_term == self.term,
        )

    def _send(self, msg: Message) -> None:
        self._msgs.append(msg)
