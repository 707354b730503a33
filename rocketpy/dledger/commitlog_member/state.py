"""``MemberState`` of DLedger 0.3.1.2: role, term, vote, leader, transferee, live table.

Owns: the member's election state and its persistence in ``currterm`` (through
:mod:`rocketpy.store.dledger_log.meta`, on a thread, awaited before the caller answers) and the
quorum rule ``n/2 + 1``. Must not: send anything or run timers (:mod:`.elector` does). Mirrors
``io.openmessaging.storage.dledger.MemberState``. Why not :mod:`rocketpy.dledger.core`: that core
keeps etcd's hard state (term, vote, commit) in its own ``hardstate`` file and bumps terms when
it campaigns; 0.3.1.2 keeps ``knownMaxTermInGroup``, only raises the term in ``nextTerm`` (a
higher term seen makes a member a candidate at its old term) and has no ``commit`` in it.
"""

from __future__ import annotations

import asyncio
from enum import Enum

from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig
from rocketpy.store.dledger_log.meta import TermState, load_term_state, persist_term_state


class Role(Enum):
    """``MemberState.Role``."""

    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"
    FOLLOWER = "FOLLOWER"


class IllegalMemberState(Exception):
    """A role change the state refuses (``ILLEGAL_MEMBER_STATE``)."""


class MemberState:
    """Election state of one member; roles start as CANDIDATE."""

    def __init__(self, config: DLedgerMemberConfig) -> None:
        self.config = config
        self.group = config.group
        self.self_id = config.self_id
        self.peer_map = dict(config.peer_map)
        self.role = Role.CANDIDATE
        self.curr_term = 0
        self.curr_vote_for: str | None = None
        self.leader_id: str | None = None
        self.known_max_term_in_group = -1
        self.transferee: str | None = None
        self.term_to_take_leadership = -1
        self.peers_live_table: dict[str, bool] = {}
        #: ``synchronized (memberState)``: held across the awaited ``currterm`` writes.
        self.lock = asyncio.Lock()

    def load(self) -> None:
        """``loadTerm``. Blocks (start-up only)."""
        state = load_term_state(self.config.base_dir)
        self.curr_term = state.curr_term
        self.curr_vote_for = state.vote_leader

    async def _persist(self) -> None:
        state = TermState(curr_term=self.curr_term, vote_leader=self.curr_vote_for)
        await asyncio.to_thread(persist_term_state, self.config.base_dir, state)

    @property
    def peer_size(self) -> int:
        return len(self.peer_map)

    def is_quorum(self, num: int) -> bool:
        """``isQuorum``: at least ``n/2 + 1``."""
        return num >= self.peer_size // 2 + 1

    def is_peer_member(self, peer_id: str | None) -> bool:
        return peer_id is not None and peer_id in self.peer_map

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def is_follower(self) -> bool:
        return self.role is Role.FOLLOWER

    @property
    def is_candidate(self) -> bool:
        return self.role is Role.CANDIDATE

    async def set_curr_vote_for(self, vote_for: str | None) -> None:
        """``setCurrVoteFor``: persisted before returning."""
        self.curr_vote_for = vote_for
        await self._persist()

    async def next_term(self) -> int:
        """``nextTerm``: the known maximum if larger, else term + 1; vote cleared; persisted."""
        if self.role is not Role.CANDIDATE:
            raise IllegalMemberState(f"{self.role.name} != CANDIDATE")
        if self.known_max_term_in_group > self.curr_term:
            self.curr_term = self.known_max_term_in_group
        else:
            self.curr_term += 1
        self.curr_vote_for = None
        await self._persist()
        return self.curr_term

    def change_to_leader(self, term: int) -> None:
        if term != self.curr_term:
            raise IllegalMemberState(f"{self.curr_term} != {term}")
        self.role = Role.LEADER
        self.leader_id = self.self_id
        self.peers_live_table.clear()

    def change_to_follower(self, term: int, leader_id: str) -> None:
        if term != self.curr_term:
            raise IllegalMemberState(f"{self.curr_term} != {term}")
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.transferee = None

    def change_to_candidate(self, term: int) -> None:
        """The term itself rises only in :meth:`next_term`."""
        if term < self.curr_term:
            raise IllegalMemberState(f"should {term} >= {self.curr_term}")
        self.known_max_term_in_group = max(self.known_max_term_in_group, term)
        self.role = Role.CANDIDATE
        self.leader_id = None
        self.transferee = None
