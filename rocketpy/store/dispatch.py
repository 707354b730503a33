"""What the reput service hands to every dispatcher (consume queue, index) for one stored record.

Owns: :class:`DispatchRequest` and the :class:`CommitLogDispatcher` protocol. Mirrors upstream's
``DispatchRequest`` and ``CommitLogDispatcher`` (store.md section 5). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


# Built once per message on the send path (``CommitLog._place``), so it is the cheapest slotted
# type to build with named fields: positional, not frozen (a frozen dataclass's ``__init__`` goes
# through ``object.__setattr__`` per field, about five times the cost) and not keyword-only
# (about three times). Treat instances as read-only.
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


class CommitLogDispatcher(Protocol):
    """Receives every record the reput service dispatches, in CommitLog order. One may also
    define ``dispatch_run(run)``: :meth:`dispatch` for each record of a run (consecutive
    records in CommitLog order, of any queues: a dispatch pass) in order, with what they share
    done once; the reput then calls it once per pass."""

    def dispatch(self, request: DispatchRequest, /) -> None:
        """Index or enqueue one record; must not block on the disk. ``request`` may be shared
        with other dispatchers: read it, never change it."""
        ...
