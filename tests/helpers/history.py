"""A Jepsen-style history of sends and consumptions, and the checker that judges it (issue 7).

Pure: no sockets, no clocks. The chaos driver records every send attempt (``ok``, ``failed`` or
``unknown``) with the message key, the queue it went to and, for ``ok``, the queue offset the
broker answered; then every consumed message with its queue and queue offset, in the order the
consumer read them. :meth:`History.check` returns the violations:

* lost: a key acknowledged (SEND_OK) was never consumed, or the message the consumer read at the
  acknowledged (queue, offset) is another key;
* phantom: a consumed key no attempt ever sent;
* duplicate: a key stored at more positions than it had attempts (only retries and sends with an
  unknown or failed outcome may leave extra copies; one attempt writes at most once);
* order: within one queue the consumed offsets are not strictly increasing, or a key consumed in
  a queue it was never sent to;
* split-brain: two keys acknowledged at the same (queue, offset): two masters acknowledged
  writes of one epoch (one of the two keys is lost as well).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from enum import Enum


class Outcome(Enum):
    """What the producer learned about one send attempt."""

    OK = "ok"  # SEND_OK: the broker promises the message survives (allAckInSyncStateSet)
    FAILED = "failed"  # refused before it was stored (connection refused, not a master)
    UNKNOWN = "unknown"  # timed out, connection lost, or stored but not replicated in time


@dataclass(frozen=True, slots=True, kw_only=True)
class SendRecord:
    """One send attempt."""

    key: str
    queue_id: int
    outcome: Outcome
    queue_offset: int | None = None  # the broker's answer, OK only
    broker: str = ""  # the address that answered, OK only


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeRecord:
    """One consumed message, in the order the consumer read it."""

    key: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken guarantee."""

    kind: str  # lost, phantom, duplicate, order
    detail: str


@dataclass(frozen=True, slots=True)
class Summary:
    """Counts for the run's report."""

    ok: int
    failed: int
    unknown: int
    keys: int
    consumed: int


@dataclass(slots=True)
class History:
    """Every send attempt and every consumed message of one run."""

    sends: list[SendRecord] = field(default_factory=list)
    consumed: list[ConsumeRecord] = field(default_factory=list)

    def send(
        self,
        key: str,
        queue_id: int,
        outcome: Outcome,
        queue_offset: int | None = None,
        broker: str = "",
    ) -> None:
        """Record one send attempt."""
        if outcome is Outcome.OK and queue_offset is None:
            raise ValueError(f"SEND_OK of {key} without a queue offset")
        self.sends.append(
            SendRecord(
                key=key,
                queue_id=queue_id,
                outcome=outcome,
                queue_offset=queue_offset,
                broker=broker,
            )
        )

    def consume(self, key: str, queue_id: int, queue_offset: int) -> None:
        """Record one consumed message."""
        self.consumed.append(ConsumeRecord(key=key, queue_id=queue_id, queue_offset=queue_offset))

    def summary(self) -> Summary:
        """Counts of attempts by outcome, distinct keys and consumed messages."""
        by = Counter(s.outcome for s in self.sends)
        return Summary(
            ok=by[Outcome.OK],
            failed=by[Outcome.FAILED],
            unknown=by[Outcome.UNKNOWN],
            keys=len({s.key for s in self.sends}),
            consumed=len(self.consumed),
        )

    def check(self) -> list[Violation]:
        """Every violation of the guarantees in the module docstring; empty when the run is
        correct."""
        return [
            *self._check_split_brain(),
            *self._check_acked(),
            *self._check_sent(),
            *self._check_order(),
        ]

    def _check_split_brain(self) -> list[Violation]:
        first: dict[tuple[int, int], SendRecord] = {}
        out = []
        for s in self.sends:
            if s.outcome is not Outcome.OK or s.queue_offset is None:
                continue
            before = first.setdefault((s.queue_id, s.queue_offset), s)
            if before.key != s.key:
                out.append(
                    Violation(
                        "split-brain",
                        f"{before.key} (by {before.broker or '?'}) and {s.key} (by "
                        f"{s.broker or '?'}) both acked at {s.queue_id}/{s.queue_offset}",
                    )
                )
        return out

    def _check_acked(self) -> list[Violation]:
        at = {(c.queue_id, c.queue_offset): c.key for c in self.consumed}
        seen = {c.key for c in self.consumed}
        out = []
        for s in self.sends:
            if s.outcome is not Outcome.OK:
                continue
            if s.key not in seen:
                out.append(Violation("lost", f"{s.key} acked at {s.queue_id}/{s.queue_offset}"))
                continue
            found = at.get((s.queue_id, s.queue_offset or 0))
            if found != s.key:
                out.append(
                    Violation(
                        "lost",
                        f"{s.key} acked at {s.queue_id}/{s.queue_offset} but read {found} there",
                    )
                )
        return out

    def _check_sent(self) -> list[Violation]:
        attempts = Counter(s.key for s in self.sends)
        queues = {s.key: s.queue_id for s in self.sends}
        positions: dict[str, set[tuple[int, int]]] = defaultdict(set)
        out = []
        for c in self.consumed:
            if c.key not in attempts:
                out.append(Violation("phantom", f"{c.key} read at {c.queue_id}/{c.queue_offset}"))
                continue
            if queues[c.key] != c.queue_id:
                out.append(
                    Violation("order", f"{c.key} sent to {queues[c.key]} read in {c.queue_id}")
                )
            positions[c.key].add((c.queue_id, c.queue_offset))
        for key, where in sorted(positions.items()):
            if len(where) > attempts[key]:
                out.append(
                    Violation(
                        "duplicate", f"{key}: {len(where)} copies from {attempts[key]} attempts"
                    )
                )
        return out

    def _check_order(self) -> list[Violation]:
        last: dict[int, int] = {}
        out = []
        for c in self.consumed:
            before = last.get(c.queue_id)
            if before is not None and c.queue_offset <= before:
                out.append(
                    Violation(
                        "order",
                        f"queue {c.queue_id}: offset {c.queue_offset} ({c.key}) after {before}",
                    )
                )
            last[c.queue_id] = c.queue_offset
        return out
