"""What the reput service hands to every dispatcher (consume queue, index) for one stored record.

Owns: :class:`DispatchRequest` and the :class:`CommitLogDispatcher` protocol. Mirrors upstream's
``DispatchRequest`` and ``CommitLogDispatcher`` (store.md section 5). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


# Built once per single append (``CommitLog._append_nowait``), so it is the cheapest slotted
# type to build with named fields: positional, not frozen (a frozen dataclass's ``__init__``
# goes through ``object.__setattr__`` per field, about five times the cost) and not
# keyword-only (about three times). Treat instances as read-only.
@dataclass(slots=True)
class DispatchRequest:
    """One CommitLog record as the reput dispatches it: described by the local append that wrote
    it (a dispatch hint), or parsed back from the mapping by ``checkMessageAndReturnSize``
    (recovery, a slave's replicated bytes, a hint queue that hit its bound)."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    properties: str
    sys_flag: int
    prepared_transaction_offset: int
    #: Parsed back from the mapping rather than described by a local append (what the reput's
    #: ``scanned`` timestamp follows). Not part of the record: left out of equality.
    scanned: bool = field(default=False, compare=False)


class BatchHint:
    """The dispatch hint of a batch one local append wrote: its records (consecutive in the
    CommitLog and in one queue, from queue offset ``consume_queue_offset``) in one object, so
    the append builds no :class:`DispatchRequest` per message and the reput writes the batch's
    consume-queue units with one pack. ``units`` holds each record's commit-log offset, size
    and tags code in turn (what a consume-queue unit stores); ``properties`` each record's
    properties text, and ``uniqs`` each record's UNIQ_KEY when the sender read them (else
    None). Never for prepared or rolled-back records. ``commit_log_offset`` and
    ``msg_size`` span the whole batch, as a request's span its record. Treat as read-only."""

    __slots__ = (
        "commit_log_offset",
        "consume_queue_offset",
        "msg_size",
        "properties",
        "queue_id",
        "store_timestamp",
        "sys_flag",
        "topic",
        "uniqs",
        "units",
    )  # fmt: skip

    #: Never parsed back from the mapping (see :attr:`DispatchRequest.scanned`).
    scanned = False

    def __init__(  # noqa: PLR0917 -- positional: built once per batch send
        self,
        topic: str,
        queue_id: int,
        store_timestamp: int,
        consume_queue_offset: int,
        sys_flag: int,
        units: list[int],
        properties: list[str],
        uniqs: list[str] | None = None,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.commit_log_offset = units[0]
        self.msg_size = units[-3] + units[-2] - units[0]
        self.store_timestamp = store_timestamp
        self.consume_queue_offset = consume_queue_offset
        self.sys_flag = sys_flag
        self.units = units
        self.properties = properties
        self.uniqs = uniqs

    def requests(self) -> list[DispatchRequest]:
        """The batch as one request per record (what a dispatch of part of it, or a
        dispatcher that takes only requests, needs)."""
        units, topic, queue_id = self.units, self.topic, self.queue_id
        out: list[DispatchRequest] = []
        offset = self.consume_queue_offset
        for i, text in zip(range(0, len(units), 3), self.properties, strict=True):
            out.append(DispatchRequest(
                topic, queue_id, units[i], units[i + 1], units[i + 2], self.store_timestamp,
                offset, text, self.sys_flag, 0,
            ))  # fmt: skip
            offset += 1
        return out

    def __repr__(self) -> str:
        return (f"BatchHint({self.topic!r}, {self.queue_id}, offset={self.commit_log_offset}, "
                f"size={self.msg_size}, records={len(self.properties)})")  # fmt: skip


#: What the reput takes from the hint queue, or scans: one record, or a hinted batch.
Hint = DispatchRequest | BatchHint


class CommitLogDispatcher(Protocol):
    """Receives every record the reput service dispatches, in CommitLog order. One may also
    define ``dispatch_run(run)``: :meth:`dispatch` for each record of a run (consecutive
    records in CommitLog order, of any queues: a dispatch pass) in order, with what they share
    done once; the reput then calls it once per pass. A run may hold :class:`BatchHint` s
    (each for its records); :meth:`dispatch` is only ever given requests."""

    def dispatch(self, request: DispatchRequest, /) -> None:
        """Index or enqueue one record; must not block on the disk. ``request`` may be shared
        with other dispatchers: read it, never change it."""
        ...


@runtime_checkable
class BoundedDispatcher(Protocol):
    """A dispatcher that works behind the reput and may fall behind it (an index worker): the
    reput waits on :meth:`drain` before a pass while :meth:`backlogged` says so."""

    def backlogged(self) -> bool:
        """Whether the reput should wait before dispatching more."""
        ...

    def last_held(self) -> int:
        """The commit-log offset of the last record it is known to hold (-1: none); what
        follows may not have reached it before a crash, so the start-up re-dispatch begins
        there when the consume queues are ahead (it skips that record itself)."""
        ...

    async def drain(self) -> None:
        """Return once the backlog is small again (or can no longer shrink)."""
        ...

    def rewound(self) -> None:
        """The reput went back to :meth:`last_held` after :meth:`ReputService.rewind
        <rocketpy.store.consume_queue.reput.ReputService.rewind>` (or found nothing to go back
        to): what it dispatches from now on follows what the dispatcher holds."""
        ...
