"""Values around the Raft core: its configuration, the Ready it hands out, its status and errors.

Owns: :class:`RaftConfig`, :class:`Role`, :class:`SoftState`, :class:`Ready`, :class:`Status`,
:class:`NotLeader`/:class:`LeadershipTransferring` and the :class:`Rng` protocol. Must not: do
I/O. Re-exported by :mod:`rocketpy.dledger.core`, where the driver contract is written down.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from rocketpy.common.errors import RocketPyError
from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.messages import Entry, HardState, Message, ParseResult, Snapshot


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
