"""What a read of a consume queue returns (store.md section 10).

Owns: :class:`GetMessageStatus` and :class:`GetResult` (``GetMessageResult``), used by the store,
the broker's pull path and the schedule service alike. Pure values.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class GetMessageStatus(enum.StrEnum):
    """``GetMessageStatus`` (store.md section 10; the pull response remark)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_RESET = "OFFSET_RESET"


@dataclass(frozen=True, slots=True, kw_only=True)
class GetResult:
    """``GetMessageResult``: whole stored records in queue order. ``suggest_pulling_from_slave``
    is the broker's hint (the read is far behind the commit log's end)."""

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: Sequence[bytes] = ()
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        """Number of records."""
        return len(self.records)
