"""The bounded log queue: a listener that falls behind costs dropped records, never memory or a
blocked caller (issue 25, item 3)."""

from __future__ import annotations

import logging
import queue

from rocketpy.common.logging import BoundedQueueHandler, trim_backlog


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


def test_log_shutdown_trims_the_backlog_to_the_newest_records() -> None:
    """1. A queue of 3,000 records 'flood 0'..'flood 2999'. 2. Trim it to 1,000.
    Expected: 2,000 dropped (the oldest); the queue holds 'flood 2000'..'flood 2999' in order,
    then a warning saying 2,000 were dropped at shutdown."""
    q: queue.Queue[logging.LogRecord] = queue.Queue(5000)
    for n in range(3000):
        q.put_nowait(_record(n))
    assert trim_backlog(q, 1000) == 2000
    left = [q.get_nowait().getMessage() for _ in range(q.qsize())]
    assert left[:-1] == [f"flood {n}" for n in range(2000, 3000)]
    assert left[-1] == "log records dropped at shutdown: 2000 (the log was behind)"
    assert trim_backlog(q, 1000) == 0
