"""What the Raft core reads from stable storage, and an in-memory implementation.

Owns: the :class:`StorageView` protocol (the read side of the persisted log: hard state,
snapshot, entries), the errors it raises, and :class:`MemoryStorage`, a complete in-memory
storage used by tests and by the simulation (restart = a new core over the same storage).
Must not: do I/O. The durable implementation is :class:`rocketpy.dledger.log.DLedgerLog`.

Model: etcd-io/raft ``storage.go`` (``Storage``, ``MemoryStorage``). Contract for writers
(the driver calls these after :meth:`RaftCore.ready` and before :meth:`RaftCore.advance`):

1. ``install_snapshot(snapshot)`` if the Ready carries one (drops every entry);
2. ``append(entries)``: entries[0].index may be <= last_index(): the suffix from there is
   replaced (a follower overwriting an uncommitted tail);
3. ``set_hard_state(hs)``;
4. only then send the Ready's messages and apply its committed entries.

Compaction is the application's call: ``create_snapshot(index, data)`` then ``compact(index)``
with ``index`` <= the applied index.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Protocol

from rocketpy.common.errors import RocketPyError
from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.messages import Entry, HardState, Snapshot, SnapshotMeta


class LogCompacted(RocketPyError):
    """The requested index is at or below the snapshot: its entry is gone."""

    def __init__(self, index: int, first_index: int) -> None:
        self.index = index
        self.first_index = first_index
        super().__init__(f"index {index} compacted (first index {first_index})")


class LogUnavailable(RocketPyError):
    """The requested index is above the last index."""

    def __init__(self, index: int, last_index: int) -> None:
        self.index = index
        self.last_index = last_index
        super().__init__(f"index {index} unavailable (last index {last_index})")


class StorageView(Protocol):
    """Read side of the persisted Raft state. Reads never block on the disk."""

    def hard_state(self) -> HardState:
        """The last persisted term, vote and commit index."""
        ...

    def snapshot(self) -> Snapshot:
        """The latest snapshot (index 0 and empty data when there is none)."""
        ...

    def first_index(self) -> LogIndex:
        """Index of the first entry still in the log (snapshot index + 1)."""
        ...

    def last_index(self) -> LogIndex:
        """Index of the last entry (the snapshot index when the log is empty)."""
        ...

    def term(self, index: LogIndex) -> Term:
        """Term of the entry at ``index``; valid from snapshot index to last index.

        Raises:
            LogCompacted: ``index`` < snapshot index.
            LogUnavailable: ``index`` > last index.
        """
        ...

    def entries(self, lo: LogIndex, hi: LogIndex, max_bytes: int) -> list[Entry]:
        """Entries ``[lo, hi)``; at least one if the range is not empty, then up to
        ``max_bytes`` of data.

        Raises:
            LogCompacted: ``lo`` < first index.
            LogUnavailable: ``hi`` > last index + 1.
        """
        ...


def limit_size(entries: Sequence[Entry], max_bytes: int) -> list[Entry]:
    """The longest prefix of ``entries`` within ``max_bytes`` of data (never fewer than 1)."""
    out: list[Entry] = []
    size = 0
    for e in entries:
        size += len(e.data) + 16
        if out and size > max_bytes:
            break
        out.append(e)
    return out


class MemoryStorage:
    """A :class:`StorageView` plus its writers, all in memory (etcd ``MemoryStorage``)."""

    def __init__(self) -> None:
        self._hard = HardState()
        self._snapshot = Snapshot()
        # Invariant: _entries[i].index == _base.index + 1 + i; _base is the compaction point
        # (index and term of the entry just before _entries[0]); _base.index <= snapshot index.
        self._base = SnapshotMeta()
        self._entries: list[Entry] = []

    # -- reads ---------------------------------------------------------------------------------

    def hard_state(self) -> HardState:
        """The last persisted hard state."""
        return self._hard

    def snapshot(self) -> Snapshot:
        """The latest snapshot."""
        return self._snapshot

    def first_index(self) -> LogIndex:
        """Compaction point + 1."""
        return LogIndex(self._base.index + 1)

    def last_index(self) -> LogIndex:
        """Last entry index, or the compaction point."""
        return LogIndex(self._base.index + len(self._entries))

    def term(self, index: LogIndex) -> Term:
        """Term at ``index`` (see :class:`StorageView`)."""
        base = self._base.index
        if index < base:
            raise LogCompacted(index, base + 1)
        if index > self.last_index():
            raise LogUnavailable(index, self.last_index())
        if index == base:
            return self._base.term
        return self._entries[index - base - 1].term

    def entries(self, lo: LogIndex, hi: LogIndex, max_bytes: int) -> list[Entry]:
        """Entries ``[lo, hi)`` (see :class:`StorageView`)."""
        base = self._base.index
        if lo <= base:
            raise LogCompacted(lo, base + 1)
        if hi > self.last_index() + 1:
            raise LogUnavailable(hi - 1, self.last_index())
        return limit_size(self._entries[lo - base - 1 : hi - base - 1], max_bytes)

    # -- writes --------------------------------------------------------------------------------

    def set_hard_state(self, hard_state: HardState) -> None:
        """Persist term, vote and commit."""
        self._hard = hard_state

    def append(self, entries: Sequence[Entry]) -> None:
        """Append ``entries``, replacing any suffix from ``entries[0].index`` on.

        Raises:
            ValueError: a gap after the last index, or entries not contiguous.
        """
        if not entries:
            return
        base = self._base.index
        first = entries[0].index
        if first > self.last_index() + 1:
            raise ValueError(f"gap: appending {first} after last index {self.last_index()}")
        check_contiguous(entries)
        skip = max(0, base + 1 - first)  # entries already covered by the compaction point
        keep = max(0, first - base - 1)
        self._entries = self._entries[:keep] + list(entries[skip:])

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """Replace everything with ``snapshot`` (a follower catching up)."""
        self._snapshot = snapshot
        self._base = snapshot.meta
        self._entries = []

    def create_snapshot(self, index: LogIndex, data: bytes) -> Snapshot:
        """Record the state machine's ``data`` as of ``index`` (which must be in the log).

        Raises:
            ValueError: ``index`` is older than the current snapshot.
        """
        if index < self._snapshot.meta.index:
            raise ValueError(f"snapshot {index} older than {self._snapshot.meta.index}")
        self._snapshot = Snapshot(meta=SnapshotMeta(index=index, term=self.term(index)), data=data)
        return self._snapshot

    def compact(self, index: LogIndex) -> None:
        """Drop entries up to ``index``, which the snapshot must cover.

        Raises:
            ValueError: ``index`` is beyond the snapshot.
        """
        if index > self._snapshot.meta.index:
            raise ValueError(f"compact {index} beyond snapshot {self._snapshot.meta.index}")
        if index <= self._base.index:
            return
        term = self.term(index)
        self._entries = self._entries[index - self._base.index :]
        self._base = SnapshotMeta(index=index, term=term)


def check_contiguous(entries: Sequence[Entry]) -> None:
    """Raise ValueError unless the entries' indices increase by one."""
    for prev, cur in itertools.pairwise(entries):
        if cur.index != prev.index + 1:
            raise ValueError(f"entries not contiguous: {prev.index} then {cur.index}")
