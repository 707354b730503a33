"""The Raft core's view of its log: stable storage plus the not-yet-persisted tail.

Owns: :class:`RaftLog` (committed/applied indices, the unstable entries and snapshot handed to
the driver through ``Ready``, the log-matching checks). Must not: write anything; persisting is
the driver's job (see :mod:`rocketpy.dledger.storage` for the writer contract).

Model: etcd-io/raft ``log.go`` and ``log_unstable.go``. Invariants (checked by the tests):

* ``storage.first_index() - 1 <= applied <= committed <= last_index()``;
* unstable entries start at ``offset`` and shadow storage from there on: an index >= offset is
  read from memory even if storage still holds an older entry there (a truncated tail that the
  next Ready overwrites);
* a committed entry is never truncated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.messages import Entry, Snapshot
from rocketpy.dledger.storage import LogCompacted, LogUnavailable, StorageView, limit_size


@dataclass(slots=True)
class Unstable:
    """Entries and a snapshot accepted by the core but not yet reported persisted."""

    offset: int  # index of entries[0] (or where it would be)
    entries: list[Entry] = field(default_factory=list)
    snapshot: Snapshot | None = None

    def last_index(self) -> int | None:
        """Index of the last unstable entry, else of the unstable snapshot, else None."""
        if self.entries:
            return self.offset + len(self.entries) - 1
        if self.snapshot is not None:
            return self.snapshot.meta.index
        return None

    def term(self, index: int) -> int | None:
        """Term at ``index`` if the unstable part knows it."""
        if index < self.offset:
            if self.snapshot is not None and self.snapshot.meta.index == index:
                return self.snapshot.meta.term
            return None
        last = self.last_index()
        if last is None or index > last:
            return None
        return self.entries[index - self.offset].term

    def truncate_and_append(self, entries: Sequence[Entry]) -> None:
        """Append, replacing any unstable suffix from ``entries[0].index`` on."""
        after = entries[0].index
        if after == self.offset + len(self.entries):
            self.entries.extend(entries)
        elif after <= self.offset:
            # Replaces stable entries too: the driver truncates storage when it persists these.
            self.offset = after
            self.entries = list(entries)
        else:
            self.entries = self.entries[: after - self.offset] + list(entries)

    def stable_to(self, index: int, term: int) -> None:
        """Forget unstable entries up to ``index`` if the entry there still has ``term``."""
        if self.term(index) != term or index < self.offset:
            return
        self.entries = self.entries[index + 1 - self.offset :]
        self.offset = index + 1

    def stable_snapshot_to(self, index: int) -> None:
        """Forget the unstable snapshot once persisted."""
        if self.snapshot is not None and self.snapshot.meta.index == index:
            self.snapshot = None

    def restore(self, snapshot: Snapshot) -> None:
        """Everything is replaced by ``snapshot``."""
        self.offset = snapshot.meta.index + 1
        self.entries = []
        self.snapshot = snapshot


class RaftLog:
    """Stable storage + :class:`Unstable`, with the commit and apply cursors."""

    def __init__(self, storage: StorageView) -> None:
        self.storage = storage
        self.unstable = Unstable(offset=storage.last_index() + 1)
        snap_index = storage.snapshot().meta.index
        # The driver restores the state machine from storage.snapshot() before the first Ready.
        self.applied = LogIndex(max(snap_index, storage.first_index() - 1))
        commit = storage.hard_state().commit
        self.committed = LogIndex(min(max(commit, self.applied), self.last_index()))

    # -- positions -----------------------------------------------------------------------------

    def first_index(self) -> LogIndex:
        """First index readable from this log."""
        if self.unstable.snapshot is not None:
            return LogIndex(self.unstable.snapshot.meta.index + 1)
        return self.storage.first_index()

    def last_index(self) -> LogIndex:
        """Index of the last entry (0 for an empty, never-compacted log)."""
        last = self.unstable.last_index()
        return LogIndex(last) if last is not None else self.storage.last_index()

    def last_term(self) -> Term:
        """Term of the last entry (DLedger ``ledgerEndTerm``)."""
        return self.term(self.last_index())

    def term(self, index: LogIndex) -> Term:
        """Term at ``index``.

        Raises:
            LogCompacted: below the first index - 1.
            LogUnavailable: beyond the last index.
        """
        t = self.unstable.term(index)
        if t is not None:
            return Term(t)
        if index >= self.unstable.offset:
            raise LogUnavailable(index, self.last_index())
        return self.storage.term(index)

    def term_or_none(self, index: LogIndex) -> Term | None:
        """Term at ``index``, or None if compacted or unavailable."""
        try:
            return self.term(index)
        except (LogCompacted, LogUnavailable):
            return None

    def match_term(self, index: LogIndex, term: Term) -> bool:
        """Raft 5.3 log matching: does the entry at ``index`` have ``term``?"""
        return self.term_or_none(index) == term

    # -- reading entries -----------------------------------------------------------------------

    def slice(self, lo: LogIndex, hi: LogIndex, max_bytes: int) -> list[Entry]:
        """Entries ``[lo, hi)`` limited to ``max_bytes`` (at least one).

        Raises:
            LogCompacted: ``lo`` below the first index.
        """
        if lo >= hi:
            return []
        if lo < self.first_index():
            raise LogCompacted(lo, self.first_index())
        out: list[Entry] = []
        offset = self.unstable.offset
        if lo < offset:
            out = self.storage.entries(lo, LogIndex(min(hi, offset)), max_bytes)
            if len(out) < min(hi, offset) - lo:
                return out  # size limit reached inside storage
        if hi > offset:
            start = max(lo, offset) - offset
            out = out + self.unstable.entries[start : hi - offset]
        return limit_size(out, max_bytes)

    def next_committed(self, max_bytes: int) -> list[Entry]:
        """Committed entries not yet applied."""
        lo = LogIndex(max(self.applied + 1, self.first_index()))
        return self.slice(lo, LogIndex(self.committed + 1), max_bytes)

    def has_next_committed(self) -> bool:
        """Are there committed entries to apply?"""
        return self.committed > self.applied

    # -- changing the log ----------------------------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> LogIndex:
        """Append entries (replacing a suffix from ``entries[0].index``); returns last index."""
        if not entries:
            return self.last_index()
        after = entries[0].index - 1
        if after < self.committed:
            raise AssertionError(f"append after {after} would overwrite committed {self.committed}")
        self.unstable.truncate_and_append(entries)
        return self.last_index()

    def find_conflict(self, entries: Sequence[Entry]) -> LogIndex:
        """Index of the first entry that is new or differs in term (0 if none)."""
        for e in entries:
            if not self.match_term(e.index, e.term):
                return e.index
        return LogIndex(0)

    def maybe_append(
        self, prev_index: LogIndex, prev_term: Term, commit: LogIndex, entries: Sequence[Entry]
    ) -> LogIndex | None:
        """Raft 5.3 AppendEntries receiver: returns the last new index or None on mismatch."""
        if not self.match_term(prev_index, prev_term):
            return None
        last_new = LogIndex(prev_index + len(entries))
        conflict = self.find_conflict(entries)
        if conflict:
            if conflict <= self.committed:
                raise AssertionError(f"conflict {conflict} with committed {self.committed}")
            self.append(entries[conflict - prev_index - 1 :])
        self.commit_to(LogIndex(min(commit, last_new)))
        return last_new

    def commit_to(self, index: LogIndex) -> None:
        """Move the commit index forward (never back)."""
        if index > self.committed:
            if index > self.last_index():
                raise AssertionError(f"commit {index} beyond last index {self.last_index()}")
            self.committed = index

    def maybe_commit(self, index: LogIndex, term: Term) -> bool:
        """Raft 5.4.2: commit ``index`` only if its entry is from the current ``term``."""
        if index > self.committed and self.term_or_none(index) == term:
            self.commit_to(index)
            return True
        return False

    def applied_to(self, index: LogIndex) -> None:
        """Record that the driver applied everything up to ``index``."""
        if index > self.committed or index < self.applied:
            raise AssertionError(f"applied {index} outside [{self.applied}, {self.committed}]")
        self.applied = index

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the log by ``snapshot`` (a follower too far behind)."""
        self.committed = snapshot.meta.index
        self.unstable.restore(snapshot)

    def stable_to(self, index: LogIndex, term: Term) -> None:
        """The driver persisted entries up to ``index`` (of ``term``)."""
        self.unstable.stable_to(index, term)

    def stable_snapshot_to(self, index: LogIndex) -> None:
        """The driver persisted the snapshot at ``index``."""
        self.unstable.stable_snapshot_to(index)
