"""The leader's record of each follower's replication progress.

Owns: :class:`Progress` (match/next indices, the probe / replicate / snapshot states, the
window of in-flight appends that makes pipelining possible) and :func:`quorum_index`.
Must not: send anything; the core decides what to send from these values.

Model: etcd-io/raft ``tracker/progress.go``, ``tracker/inflights.go``, ``quorum/majority.go``;
DLedger's ``DLedgerEntryPusher`` keeps the same facts as ``peerWaterMarks`` and its
per-follower ``pendingMap`` (pipelined pushes) and batches several entries per push.

States:

| state | sends | leaves when |
| --- | --- | --- |
| PROBE | one append at a time (then paused until a response or heartbeat) | an append succeeds |
| REPLICATE | appends back to back, ``next`` advanced optimistically, at most
  ``max_inflight`` unacknowledged | a rejection (back to PROBE) |
| SNAPSHOT | nothing; waits for the install-snapshot response | response or timeout |
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from rocketpy.common.types import LogIndex
from rocketpy.dledger.messages import NO_INDEX

FIRST_INDEX: Final = LogIndex(1)


class ProgressState(Enum):
    """How the leader currently sends to one follower."""

    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


@dataclass(slots=True)
class Progress:
    """One follower, as seen by the leader.

    Invariants: ``match < next``; in REPLICATE the in-flight last indices are increasing and
    all > ``match``; ``pending_snapshot`` is non-zero only in SNAPSHOT.
    """

    match: LogIndex = NO_INDEX
    next: LogIndex = FIRST_INDEX
    state: ProgressState = ProgressState.PROBE
    probe_sent: bool = False  # PROBE: an append is out, wait for its answer
    inflight: deque[LogIndex] = field(default_factory=deque)  # last index of each append
    pending_snapshot: LogIndex = NO_INDEX
    snapshot_wait: int = 0  # heartbeats answered while a snapshot is outstanding

    def become_probe(self) -> None:
        """Resend from ``match + 1`` one append at a time."""
        if self.state is ProgressState.SNAPSHOT:
            self.next = LogIndex(max(self.match + 1, self.pending_snapshot + 1))
        else:
            self.next = LogIndex(self.match + 1)
        self._reset(ProgressState.PROBE)

    def become_replicate(self) -> None:
        """Stream appends from ``match + 1``."""
        self.next = LogIndex(self.match + 1)
        self._reset(ProgressState.REPLICATE)

    def become_snapshot(self, index: LogIndex) -> None:
        """Wait for the follower to install the snapshot at ``index``."""
        self._reset(ProgressState.SNAPSHOT)
        self.pending_snapshot = index

    def _reset(self, state: ProgressState) -> None:
        self.state = state
        self.probe_sent = False
        self.inflight.clear()
        self.pending_snapshot = LogIndex(0)
        self.snapshot_wait = 0

    def is_paused(self, max_inflight: int) -> bool:
        """May the leader not send another append now?"""
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return len(self.inflight) >= max_inflight
        return True

    def sent(self, last: LogIndex, count: int) -> None:
        """Record an append whose entries end at ``last`` (``count`` entries)."""
        if self.state is ProgressState.REPLICATE:
            if count:
                self.next = LogIndex(last + 1)
                self.inflight.append(last)
        elif self.state is ProgressState.PROBE:
            self.probe_sent = True

    def maybe_update(self, index: LogIndex) -> bool:
        """An append up to ``index`` succeeded; returns whether ``match`` moved."""
        updated = index > self.match
        if updated:
            self.match = index
            self.probe_sent = False
        self.next = LogIndex(max(self.next, index + 1))
        while self.inflight and self.inflight[0] <= index:
            self.inflight.popleft()
        return updated

    def maybe_decrement(self, rejected: LogIndex, hint: LogIndex) -> bool:
        """An append after ``rejected`` failed; the follower's last index is ``hint``.

        Returns False for a stale rejection (one that says nothing new).
        """
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.become_probe()
            return True
        if self.next - 1 != rejected:
            return False
        self.next = LogIndex(max(min(rejected, hint + 1), self.match + 1))
        self.probe_sent = False
        return True

    def free_one(self) -> None:
        """Heartbeat answered while the window is full: allow one more append."""
        if self.inflight:
            self.inflight.popleft()


def quorum_index(indices: Iterable[int]) -> LogIndex:
    """The largest index that a majority of ``indices`` has reached."""
    ordered = sorted(indices, reverse=True)
    return LogIndex(ordered[len(ordered) // 2])
