"""How a DLedger send joins its entries' quorum answers (``DLedgerCommitLog.put_soon``): one
result per send, PUT_OK only when every entry is answered 200, else the first entry's failure,
whatever order the answers come in and even before the append finished."""

from __future__ import annotations

import asyncio

from rocketpy.broker.dledger_commitlog import _Answers
from rocketpy.dledger.commitlog_member.protocol import DLedgerResponseCode
from rocketpy.store.commit_log.put_types import PutMessageStatus, PutResult

OK = DLedgerResponseCode.SUCCESS


def _answers() -> tuple[_Answers, asyncio.Future[PutResult]]:
    """A send's joined answers and the future its ``on_result`` completes."""
    fut: asyncio.Future[PutResult] = asyncio.get_running_loop().create_future()
    return _Answers(fut.set_result), fut


async def test_dledger_answers_settle_after_every_entry() -> None:
    """1. Three entries appended; entries 2 and 0 answer 200. Expected: not settled.
    2. Entry 1 answers 200. Expected: settled with the result as built (PUT_OK)."""
    a, fut = _answers()
    result = PutResult(PutMessageStatus.PUT_OK, 48, 100, "id", 0, 1, 3)
    a.expect(result, 3)
    a.at(2, OK)
    a.at(0, OK)
    assert not fut.done()
    a.at(1, OK)
    assert fut.result() is result
    assert result.status is PutMessageStatus.PUT_OK


async def test_dledger_answers_report_the_first_entrys_failure() -> None:
    """1. Three entries; entry 2 answers 501, then entry 1 answers 502, then entry 0 200.
    Expected: settled once all three answered, with entry 1's failure (the first entry that
    failed, not the first failure to arrive): 502 -> IN_SYNC_REPLICAS_NOT_ENOUGH (501 would
    be UNKNOWN_ERROR: the outcome is indeterminate)."""
    a, fut = _answers()
    a.expect(PutResult(PutMessageStatus.PUT_OK), 3)
    a.at(2, DLedgerResponseCode.TERM_CHANGED)
    a.at(1, DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT)
    assert not fut.done()
    a.at(0, OK)
    assert fut.result().status is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH


async def test_dledger_answers_before_the_append_finished() -> None:
    """1. A group of one answers during the append: entry 0 answers 200 before ``expect``.
    Expected: not settled (the send's result is not built yet). 2. ``expect(result, 1)``.
    Expected: settled at once. 3. A stray late answer. Expected: no error, result kept."""
    a, fut = _answers()
    a.answered_first(OK)
    assert not fut.done()
    result = PutResult(PutMessageStatus.OS_PAGE_CACHE_BUSY, 48, 10, "id", 0, 1, 1)
    a.expect(result, 1)
    assert fut.result() is result
    assert result.status is PutMessageStatus.OS_PAGE_CACHE_BUSY  # a refused tail stays so
    a.at(0, DLedgerResponseCode.INTERNAL_ERROR)
    assert fut.result().status is PutMessageStatus.OS_PAGE_CACHE_BUSY
