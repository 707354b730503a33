"""What the reput service hands to every dispatcher (consume queue, index) for one stored record.

Owns: :class:`DispatchRequest` and the :class:`CommitLogDispatcher` protocol. Mirrors upstream's
``DispatchRequest`` and ``CommitLogDispatcher`` (store.md section 5). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


# Not frozen: one is built per scanned record and a frozen dataclass's ``__init__`` goes through
# ``object.__setattr__`` per field (about twice the cost). Treat instances as read-only. Field
# order is the positional order of :meth:`CommitLogDispatcher.dispatch`: keep them alike.
@dataclass(slots=True)
class DispatchRequest:
    """One valid CommitLog record as ``checkMessageAndReturnSize`` parses it back (recovery, a
    slave's replicated bytes); the fields a dispatcher is given."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    properties: str = ""
    sys_flag: int = 0
    prepared_transaction_offset: int = 0


class CommitLogDispatcher(Protocol):
    """Receives every record the reput service dispatches, in CommitLog order."""

    def dispatch(  # noqa: PLR0917 -- positional: called per record
        self,
        topic: str,
        queue_id: int,
        commit_log_offset: int,
        msg_size: int,
        tags_code: int,
        store_timestamp: int,
        consume_queue_offset: int,
        properties: str,
        sys_flag: int,
        prepared_transaction_offset: int,
        /,
    ) -> None:
        """Index or enqueue one record (the fields of a :class:`DispatchRequest`, positional:
        the reput describes a record it appended without building one, and a dispatcher reads
        from ``properties`` only what it needs); must not block on the disk."""
        ...
