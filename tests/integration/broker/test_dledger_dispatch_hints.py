"""The DLedger leader's dispatch hints: what its appends leave for the reput equals what the reput
would parse back from the data files, the reput dispatches the hints themselves, and a member
that stops leading drops them (its uncommitted tail may be replaced by another leader's)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.dledger_store import DLedgerMessageStore, member_config
from rocketpy.common.aio import wait_until
from rocketpy.common.message.record import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE
from rocketpy.dledger.commitlog_member.member import DLedgerMember
from rocketpy.dledger.commitlog_member.state import Role
from rocketpy.store.commit_log.put_types import (
    MessageBatch,
    MessageToStore,
    PutMessageStatus,
    PutResult,
)
from rocketpy.store.consume_queue.reput import scan_record
from rocketpy.store.dispatch import DispatchRequest
from tests.helpers.dledger_brokers import free_ports
from tests.helpers.dledger_store import leading, one_member_config

pytestmark = pytest.mark.integration


class Recorder:
    """A dispatcher that keeps what it was handed."""

    def __init__(self) -> None:
        self.seen: list[DispatchRequest] = []

    def dispatch(self, request: DispatchRequest, /) -> None:
        self.seen.append(request)


def _parsed(store: DLedgerMessageStore, hint: DispatchRequest) -> DispatchRequest | None:
    raw = store.commit_log.mfq.read(hint.commit_log_offset, hint.msg_size)
    assert raw is not None
    req, size = scan_record(memoryview(raw), hint.commit_log_offset, check_crc=True)
    assert size == hint.msg_size
    return req


def _puts(store: DLedgerMessageStore, n: int) -> list[asyncio.Future[PutResult]]:
    """Put a tagged single message, a batch of three and a prepared half message, with no
    await in between (the reput has not run when this returns)."""
    tagged = MessageToStore.with_properties(
        topic="T", queue_id=0, body=f"one-{n}".encode(),
        properties={"TAGS": "TagA", "KEYS": f"k{n}", "UNIQ_KEY": f"U{n}"},
    )  # fmt: skip
    batch = MessageBatch(
        topic="T",
        queue_id=1,
        items=[(0, f"b{n}-{i}".encode(), f"KEYS\x01b{i}\x02") for i in range(3)],
    )
    half = MessageToStore.with_properties(
        topic="RMQ_SYS_TRANS_HALF_TOPIC", queue_id=0, body=b"half",
        properties={"TRAN_MSG": "true"}, sys_flag=TRANSACTION_PREPARED_TYPE,
    )  # fmt: skip
    futures = []
    for what in (tagged, batch, half):
        soon = store.commit_log.put_soon(what)
        assert isinstance(soon, asyncio.Future), soon
        futures.append(soon)
    return futures


async def test_dledger_hints_match_the_records_and_are_dropped_on_role_change(
    tmp_path: Path,
) -> None:
    """1. A one-member DLedger store that leads; register a recording dispatcher. Put a tagged
    message, a batch of 3 and a prepared half message without awaiting. Expected: 5 hints,
    each equal to the request parsed back from its record (offset = entry pos + 48, size,
    tags code, queue offset, properties, store time, sys flag).
    2. Await the puts and the dispatch. Expected: PUT_OK each; the dispatcher was handed
    requests equal to the hints, in order; no hint is left.
    3. Put again, then make the member a candidate of the next term before the reput runs.
    Expected: the hints are gone at once. Once it leads again everything is dispatched
    anyway (parsed back, equal to the records).
    4. Put again (every queue exists now). Expected: the dispatcher is handed the very hint
    objects the appends left, in order."""
    (port,) = free_ports(1)
    cfg = one_member_config(tmp_path / "store", port)
    member = DLedgerMember(member_config(cfg, BrokerConfig(brokerName="broker-a")))
    store = DLedgerMessageStore(cfg, member)
    recorder = Recorder()
    store.reput.register(recorder)
    async with leading(store):
        futures = _puts(store, 0)
        hints = list(store.commit_log.dispatch_hints)
        assert len(hints) == 5
        for hint in hints:
            assert _parsed(store, hint) == hint
        assert [h.consume_queue_offset for h in hints] == [0, 0, 1, 2, 0]
        results = await asyncio.gather(*futures)
        assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 3
        await wait_until(lambda: len(recorder.seen) == 5, 5)
        # (A record taken ahead while its queue's first unit was written off the loop is
        # parsed again: equal either way.)
        assert recorder.seen == hints
        assert not store.commit_log.dispatch_hints

        futures = _puts(store, 1)
        assert len(store.commit_log.dispatch_hints) == 5
        member.elector.change_role_to_candidate(member.term + 1)
        assert not store.commit_log.dispatch_hints
        await wait_until(lambda: member.role is Role.LEADER, 10)
        await asyncio.gather(*futures)
        await wait_until(lambda: len(recorder.seen) == 10, 5)
        for req in recorder.seen[5:]:
            assert _parsed(store, req) == req
        assert store.max_offset_in_queue("T", 1) == 6

        _puts(store, 2)
        hints = list(store.commit_log.dispatch_hints)
        assert len(hints) == 5
        await wait_until(lambda: len(recorder.seen) == 15, 5)
        assert all(a is b for a, b in zip(recorder.seen[10:], hints, strict=True))
        assert not store.commit_log.dispatch_hints


async def test_dledger_log_refuses_transactional_batches(tmp_path: Path) -> None:
    """1. A one-member DLedger store that leads. 2. Put a batch flagged prepared, then one
    flagged commit. 3. Put a plain batch.
    Expected: the two are MESSAGE_ILLEGAL with nothing appended (as the plain CommitLog and
    upstream's ``asyncPutMessages``); the plain one takes queue offset 0."""
    (port,) = free_ports(1)
    cfg = one_member_config(tmp_path / "store", port)
    member = DLedgerMember(member_config(cfg, BrokerConfig(brokerName="broker-a")))
    store = DLedgerMessageStore(cfg, member)
    items = [(0, b"x", "KEYS\x01a\x02")] * 2
    async with leading(store):
        for sys_flag in (TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE):
            batch = MessageBatch(topic="T", queue_id=0, items=items, sys_flag=sys_flag)
            assert store.commit_log.put_soon(batch) == PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        assert not store.commit_log.dispatch_hints
        r = await store.put_batch(MessageBatch(topic="T", queue_id=0, items=items))
        assert (r.status, r.queue_offset) == (PutMessageStatus.PUT_OK, 0)
