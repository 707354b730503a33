"""The bounded log queue: a listener that falls behind costs dropped records, never memory or a
blocked caller (issue 25, item 3)."""

from __future__ import annotations

import logging
import queue

from rocketpy.common.logging import BoundedQueueHandler


def _record(n: int) -> logging.LogRecord:
    return logging.makeLogRecord({"name": "t", "levelno": logging.WARNING, "msg": f"flood {n}"})


def test_log_queue_drops_and_counts_when_full_then_says_so() -> None:
    """1. A handler on a queue of 5 with no listener takes 12 records.
    2. The queue is emptied; one more record is logged.
    Expected: 5 queued, 7 dropped and counted, no caller blocked; after the drain the first
    record queued is a warning saying 7 were dropped, then the record itself."""
    q: queue.Queue[logging.LogRecord] = queue.Queue(5)
    handler = BoundedQueueHandler(q)
    for n in range(12):
        handler.handle(_record(n))
    assert q.qsize() == 5
    assert (handler.dropped, handler.dropped_total) == (7, 7)
    while not q.empty():
        q.get_nowait()
    handler.handle(_record(99))
    note, last = q.get_nowait(), q.get_nowait()
    assert note.getMessage() == "log records dropped: 7 (the log queue was full)"
    assert note.levelno == logging.WARNING
    assert last.getMessage() == "flood 99"
    assert handler.dropped == 0
