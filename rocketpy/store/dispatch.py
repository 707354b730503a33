"""What the reput service hands to every dispatcher (consume queue, index) for one stored record.

Owns: :class:`DispatchRequest` and the :class:`CommitLogDispatcher` protocol. Mirrors upstream's
``DispatchRequest`` and ``CommitLogDispatcher`` (store.md section 5). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


# Not frozen: one is built per appended message and a frozen dataclass's ``__init__`` goes through
# ``object.__setattr__`` per field (about twice the cost). Treat instances as read-only. The
# reput builds it positionally (cheaper than keywords, per record): keep the field order.
@dataclass(slots=True)
class DispatchRequest:
    """One valid CommitLog record, as parsed by ``checkMessageAndReturnSize`` or as the append
    that wrote it described it (a dispatch hint, see ``ReputService``)."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str = ""
    uniq_key: str | None = None
    sys_flag: int = 0
    prepared_transaction_offset: int = 0


class CommitLogDispatcher(Protocol):
    """Receives every record the reput service dispatches, in CommitLog order."""

    def dispatch(self, request: DispatchRequest) -> None:
        """Index or enqueue one record; must not block on the disk."""
        ...
