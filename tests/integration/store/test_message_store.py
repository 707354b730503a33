"""MessageStore on real 4-8 KiB files: put, get, roll, restart, torn-tail recovery."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.clock import ManualClock
from rocketpy.common.message.decoder import decode_record
from rocketpy.common.message.record import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    encode_record,
)
from rocketpy.store.commit_log import commit_log as commit_log_module
from rocketpy.store.commit_log.put_types import (
    MessageBatch,
    MessageToStore,
    PutMessageStatus,
    PutResult,
)
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.consume_queue.reput import read_request
from rocketpy.store.dispatch import BatchHint, DispatchRequest
from rocketpy.store.get_types import GetMessageStatus
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration


def _config(root: Path, flush: str = "ASYNC_FLUSH") -> MessageStoreConfig:
    return MessageStoreConfig.build({
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": 4096,
        "mappedFileSizeConsumeQueue": 400,
        "flushDiskType": flush,
        "flushIntervalCommitLog": 50,
        "syncFlushTimeout": 2000,
    })  # fmt: skip


def _msg(i: int, queue_id: int = 0) -> MessageToStore:
    return MessageToStore(
        topic="TopicTest", queue_id=queue_id, body=f"body-{i}".encode() * 10,
        properties=f"TAGS\x01tag{i % 2}\x02KEYS\x01k{i}\x02",
    )  # fmt: skip


def _batch(numbers: Iterable[int]) -> MessageBatch:
    """A batch of what :func:`_msg` would send for each number, to queue 0."""
    items = [(0, m.body, m.properties) for m in map(_msg, numbers)]
    return MessageBatch(topic="TopicTest", queue_id=0, items=items)


async def test_message_store_put_get_roll_restart(tmp_path: Path) -> None:
    """1. Start a SYNC_FLUSH store, put 60 messages over two queues (rolls 4 KiB segments).
    2. Read queue 0 back. 3. Stop, start again (normal recovery), read again, put one more.
    Expected: PUT_OK with consecutive queue offsets; FOUND records equal to what was sent;
    after restart the same bytes and the queue continues at the next offset."""
    async with asyncio.timeout(30):
        store = MessageStore(_config(tmp_path, "SYNC_FLUSH"))
        await store.start()
        offsets = {0: [], 1: []}  # type: dict[int, list[int]]
        for i in range(60):
            r = await store.put_message(_msg(i, i % 2))
            assert r.status is PutMessageStatus.PUT_OK
            offsets[i % 2].append(r.queue_offset)
        assert offsets[0] == list(range(30))
        assert len(store.commit_log.mfq.files) > 2
        await wait_until(lambda: store.max_offset_in_queue("TopicTest", 0) == 30, 5)
        got = store.get_message("g", "TopicTest", 0, offset=0, max_count=100)
        assert got.status is GetMessageStatus.FOUND
        bodies = [decode_record(b).body for b in got.records]
        assert bodies == [_msg(i).body for i in range(0, 60, 2)]
        before = got.records
        await store.stop()

        again = MessageStore(_config(tmp_path, "SYNC_FLUSH"))
        await again.start()
        assert again.recovery is not None
        assert again.recovery.cut_bytes == 0
        got2 = again.get_message("g", "TopicTest", 0, offset=0, max_count=100)
        assert got2.records == before
        r = await again.put_message(_msg(99))
        assert r.queue_offset == 30
        assert again.get_message("g", "TopicTest", 0, offset=32, max_count=1).status is (
            GetMessageStatus.OFFSET_OVERFLOW_BADLY
        )
        await again.stop()


async def test_message_store_get_statuses(tmp_path: Path) -> None:
    """1. Start a store, query an unknown queue. 2. Put 3 messages; read at 3, 5, 1 with a tag
    filter matching nothing, and look one record up by physical offset.
    Expected: NO_MATCHED_LOGIC_QUEUE, OFFSET_OVERFLOW_ONE (next 3), OFFSET_OVERFLOW_BADLY
    (next 3), NO_MATCHED_MESSAGE; lookup returns the record."""
    async with asyncio.timeout(20):
        store = MessageStore(_config(tmp_path))
        await store.start()
        assert store.get_message("g", "Nope", 0, offset=0, max_count=1).status is (
            GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        )
        results = [await store.put_message(_msg(i)) for i in range(3)]
        await wait_until(lambda: store.max_offset_in_queue("TopicTest", 0) == 3, 5)
        one = store.get_message("g", "TopicTest", 0, offset=3, max_count=1)
        assert (one.status, one.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 3)
        bad = store.get_message("g", "TopicTest", 0, offset=5, max_count=1)
        assert (bad.status, bad.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 3)
        none = store.get_message("g", "TopicTest", 0, offset=1, max_count=5, tags_codes={1})
        assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE
        raw = store.look_message_by_offset(results[1].wrote_offset)
        assert raw is not None
        assert decode_record(raw).body == _msg(1).body
        await store.stop()


async def test_message_store_torn_tail_recovery(tmp_path: Path) -> None:
    """1. Put 5 messages, stop cleanly. 2. Recreate ``abort`` (crash) and overwrite the last
    record's second half with garbage by hand. 3. Start.
    Expected: recovery offset == start of the 5th record exactly; a copy of the cut bytes is
    kept; the queue holds 4 messages and the next put gets queue offset 4."""
    async with asyncio.timeout(20):
        cfg = _config(tmp_path)
        store = MessageStore(cfg)
        await store.start()
        results = [await store.put_message(_msg(i)) for i in range(5)]
        await store.stop()
        last = results[-1]
        seg = cfg.commit_log_dir / f"{last.wrote_offset - last.wrote_offset % 4096:020d}"
        data = bytearray(seg.read_bytes())
        pos = last.wrote_offset % 4096
        half = last.wrote_bytes // 2
        data[pos + half : pos + last.wrote_bytes] = b"\xee" * (last.wrote_bytes - half)
        seg.write_bytes(bytes(data))
        cfg.abort_path.write_text("1")

        again = MessageStore(cfg)
        await again.start()
        assert again.recovery is not None
        assert again.recovery.process_offset == last.wrote_offset
        assert again.recovery.cut_copy is not None
        assert again.recovery.cut_copy.read_bytes()[:half] == bytes(data[pos : pos + half])
        assert again.max_offset_in_queue("TopicTest", 0) == 4
        r = await again.put_message(_msg(7))
        assert r.queue_offset == 4
        assert r.wrote_offset == last.wrote_offset
        await again.stop()


async def test_message_store_sync_group_commit(tmp_path: Path) -> None:
    """1. Start a SYNC_FLUSH store. 2. Put 64 messages concurrently.
    Expected: all PUT_OK, distinct physical offsets, every one at or below the flushed offset."""
    async with asyncio.timeout(20):
        store = MessageStore(_config(tmp_path, "SYNC_FLUSH"))
        await store.start()
        results = await asyncio.gather(*(store.put_message(_msg(i)) for i in range(64)))
        assert {r.status for r in results} == {PutMessageStatus.PUT_OK}
        assert len({r.wrote_offset for r in results}) == 64
        assert max(r.wrote_offset + r.wrote_bytes for r in results) <= (
            store.commit_log.flushed_offset
        )
        await store.stop()


class _Recorder:
    """A dispatcher that keeps every request it is given."""

    def __init__(self) -> None:
        self.seen: list[DispatchRequest] = []

    def dispatch(self, request: DispatchRequest) -> None:
        self.seen.append(request)


def _record_dispatches(store: MessageStore) -> list[DispatchRequest]:
    """Register a recording dispatcher on ``store`` (before start); its list of requests."""
    recorder = _Recorder()
    store.register_dispatcher(recorder)
    return recorder.seen


async def test_message_store_dispatch_hints_equal_scanned_records(tmp_path: Path) -> None:
    """1. Put 40 messages (rolling 4 KiB segments) and let the reput dispatch them from the
    append hints. 2. Scan every record back from the mapped files as recovery does.
    3. Truncate to the 20th record, put 5 different messages.
    Expected: each hinted request equals the scanned one; after the cut the hints of the
    dropped records are gone and the queue holds the new bodies at offsets 20-24."""
    async with asyncio.timeout(30):
        store = MessageStore(_config(tmp_path))
        seen = _record_dispatches(store)
        await store.start()
        for i in range(40):
            assert (await store.put_message(_msg(i))).status is PutMessageStatus.PUT_OK
        await wait_until(lambda: len(seen) == 40, 5)
        for req in seen:
            scanned, size = read_request(
                store.commit_log.mfq, req.commit_log_offset, check_crc=True
            )
            assert (scanned, size) == (req, req.msg_size)
        cut = seen[20].commit_log_offset
        await store.truncate_files(cut)
        assert not store.commit_log.dispatch_hints
        for i in range(100, 105):
            assert (await store.put_message(_msg(i))).status is PutMessageStatus.PUT_OK
        await wait_until(lambda: store.max_offset_in_queue("TopicTest", 0) == 25, 5)
        got = store.get_message("g", "TopicTest", 0, offset=20, max_count=10)
        assert [decode_record(b).body for b in got.records] == [
            _msg(i).body for i in range(100, 105)
        ]
        await store.stop()


async def test_message_store_put_nowait_until_segment_full(tmp_path: Path) -> None:
    """1. Start an ASYNC_FLUSH store with 4 KiB segments; put one message. 2. put_message_nowait
    until it returns None; then put_message the same message. 3. A SYNC_FLUSH store:
    put_message_nowait.
    Expected: every nowait put before the None is PUT_OK with consecutive queue offsets; the None
    wrote nothing (the awaited put lands in the next segment with the next queue offset and the
    reput dispatches every one); SYNC_FLUSH never appends without waiting (None, log unchanged)."""
    async with asyncio.timeout(20):
        store = MessageStore(_config(tmp_path / "async"))
        await store.start()
        first = await store.put_message(_msg(0))  # an empty log maps its first segment
        offsets = [first.queue_offset]
        i = 1
        while (r := store.put_message_nowait(_msg(i))) is not None:
            assert r.status is PutMessageStatus.PUT_OK
            offsets.append(r.queue_offset)
            i += 1
        assert offsets == list(range(i))
        assert i > 5
        segments = len(store.commit_log.mfq.files)
        r2 = await store.put_message(_msg(i))
        assert (r2.status, r2.queue_offset) == (PutMessageStatus.PUT_OK, i)
        assert len(store.commit_log.mfq.files) == segments + 1
        await wait_until(lambda: store.max_offset_in_queue("TopicTest", 0) == i + 1, 5)
        await store.stop()

        sync = MessageStore(_config(tmp_path / "sync", "SYNC_FLUSH"))
        await sync.start()
        before = sync.commit_log.max_offset
        assert sync.put_message_nowait(_msg(0)) is None
        assert sync.commit_log.max_offset == before
        await sync.stop()


async def test_message_store_dispatch_stops_at_confirm_offset_inside_record(tmp_path: Path) -> None:
    """B-11. 1. Set a dispatch limit (the controller-mode confirm offset) to 0 and put 3
    messages. 2. Raise the limit to the middle of the second record. 3. Raise it to the end of
    the third. Expected: nothing is visible at first; only the first message once the limit
    cuts the second record (a record is dispatched whole or not at all); all three at the end."""
    async with asyncio.timeout(30):
        store = MessageStore(_config(tmp_path))
        limit = 0
        store.set_confirm_offset_provider(lambda: limit)
        await store.start()
        results = [await store.put_message(_msg(i)) for i in range(3)]
        store.reput.wake()
        await asyncio.sleep(0.05)
        assert store.max_offset_in_queue("TopicTest", 0) == 0
        second = results[1]
        limit = second.wrote_offset + second.wrote_bytes // 2
        store.reput.wake()
        await wait_until(lambda: store.max_offset_in_queue("TopicTest", 0) == 1, 5)
        await asyncio.sleep(0.05)
        assert store.max_offset_in_queue("TopicTest", 0) == 1
        assert store.reput.reput_from == second.wrote_offset
        limit = results[2].wrote_offset + results[2].wrote_bytes
        store.reput.wake()
        await wait_until(lambda: store.max_offset_in_queue("TopicTest", 0) == 3, 5)
        await store.stop()


async def test_message_store_batch_never_spans_segments(tmp_path: Path) -> None:
    """1. Start an ASYNC_FLUSH store with 4 KiB segments; put single messages until fewer than
    1,500 bytes are left in the segment. 2. put_batch_nowait a batch of 10 (about 2 KiB).
    3. put_batch the same batch. 4. put_batch a batch larger than a segment.
    Expected: step 2 returns None and stores no record; step 3 stores all 10 at the start of
    the next segment, one result with the first queue offset, 10 msg ids and the whole length;
    the reput dispatches them and they read back in order; step 4 is MESSAGE_ILLEGAL and
    stores nothing."""
    async with asyncio.timeout(20):
        store = MessageStore(_config(tmp_path))
        await store.start()
        n = 0
        while True:
            r = await store.put_message(_msg(n))
            assert r.status is PutMessageStatus.PUT_OK
            n += 1
            last = store.commit_log.mfq.last
            assert last is not None
            if last.size - last.wrote_position < 1500:
                break
        segments = len(store.commit_log.mfq.files)
        batch = _batch(range(100, 110))
        assert store.put_batch_nowait(batch) is None
        assert store.commit_log.topic_queue_table["TopicTest-0"] == n
        r = await store.put_batch(batch)
        assert r.status is PutMessageStatus.PUT_OK
        assert (r.queue_offset, r.msg_num, len(r.msg_id.split(","))) == (n, 10, 10)
        assert len(store.commit_log.mfq.files) == segments + 1
        assert r.wrote_offset == store.commit_log.mfq.files[-1].file_from_offset
        assert r.wrote_offset + r.wrote_bytes == store.commit_log.max_offset
        await wait_until(lambda: store.max_offset_in_queue("TopicTest", 0) == n + 10, 5)
        got = store.get_message("g", "TopicTest", 0, offset=n, max_count=20)
        assert [decode_record(b).body for b in got.records] == [body for _, body, _ in batch.items]

        end = store.commit_log.max_offset
        huge = _batch(range(60))  # about 6 KiB of records
        r2 = await store.put_batch(huge)
        assert r2.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.commit_log.max_offset == end
        await store.stop()


@pytest.mark.parametrize(
    ("topic", "born_host"),
    [("TopicTest", ("10.1.2.3", 5555)), ("T" * 130, ("::1", 6666))],
    ids=["v1-ipv4", "v2-ipv6"],
)
async def test_message_store_batch_records_equal_single_records(
    tmp_path: Path, topic: str, born_host: tuple[str, int]
) -> None:
    """1. Two stores on a manual clock; put 5 messages (different flags, bodies, properties,
    all sharing topic, queue, sys flag, born time and host) one by one into the first. 2. Put
    the same 5 as one batch into the second.
    Expected: the commit logs are byte-identical (same offsets, queue offsets, store times,
    CRCs, v1/v2 magic and v4/v6 host flags); the batch result carries the first queue offset,
    all 5 msg ids (those of the single puts) and the whole length."""
    async with asyncio.timeout(20):
        bodies = [b"", b"a", b"bc" * 100, bytes(range(256)), b"z" * 1000]
        texts = ["", "TAGS\x01t\x02", "KEYS\x01k1 k2\x02UNIQ_KEY\x01U1\x02", "A\x01\u00e9\x02", ""]
        shared = {"topic": topic, "queue_id": 3, "sys_flag": 0, "born_timestamp": 1234,
                  "born_host": born_host, "reconsume_times": 2}  # fmt: skip
        clock = ManualClock()
        one = MessageStore(_config(tmp_path / "one"), clock=clock)
        both = MessageStore(_config(tmp_path / "both"), clock=clock)
        await one.start()
        await both.start()
        singles = []
        for i, (body, text) in enumerate(zip(bodies, texts, strict=True)):
            msg = MessageToStore(body=body, flag=i, properties=text, **shared)  # type: ignore[arg-type]
            singles.append(await one.put_message(msg))
        items = [(i, body, text) for i, (body, text) in enumerate(zip(bodies, texts, strict=True))]
        r = await both.put_batch(MessageBatch(items=items, **shared))  # type: ignore[arg-type]
        assert r.status is PutMessageStatus.PUT_OK
        assert (r.wrote_offset, r.queue_offset, r.msg_num) == (0, 0, 5)
        assert r.msg_id == ",".join(s.msg_id for s in singles)
        assert r.wrote_bytes == sum(s.wrote_bytes for s in singles)
        end = one.commit_log.max_offset
        assert both.commit_log.max_offset == end
        assert both.commit_log.read_raw(0, end) == one.commit_log.read_raw(0, end)
        await one.stop()
        await both.stop()


async def test_message_store_reput_mixes_hints_scans_and_a_bound_inside_a_record(
    tmp_path: Path,
) -> None:
    """1. Stop the background reput after one dispatched message, put 29 more (rolling 4 KiB
    segments). 2. Drop the hints of messages 5-9 (they must be scanned) and put a stale hint
    in front. 3. Dispatch with the bound inside message 25. 4. Dispatch with the real bound.
    Expected: after 3, messages 1-24 dispatched once each, in order, equal to the scanned
    records, and ``reput_from`` at message 25; after 4, messages 1-29, no hints left, the
    queue holds 30 units and the reput is caught up."""
    async with asyncio.timeout(30):
        store = MessageStore(_config(tmp_path))
        seen = _record_dispatches(store)
        await store.start()
        assert (await store.put_message(_msg(0))).status is PutMessageStatus.PUT_OK
        await wait_until(lambda: len(seen) == 1, 5)
        reput = store.reput
        await reput.stop(store._put_cq)
        offsets = []
        for i in range(1, 30):
            r = await store.put_message(_msg(i))
            assert r.status is PutMessageStatus.PUT_OK
            offsets.append(r.wrote_offset)
        hints = store.commit_log.dispatch_hints
        kept = [h for h in hints if h.commit_log_offset not in offsets[4:9]]
        stale = dataclasses.replace(
            kept[0], commit_log_offset=seen[0].commit_log_offset, msg_size=seen[0].msg_size
        )
        hints.clear()
        hints.extend([stale, *kept])  # already dispatched
        reput.bound = lambda: offsets[24] + 10
        await reput.dispatch_available(store._put_cq)
        scanned = [read_request(store.commit_log.mfq, o, check_crc=True)[0] for o in offsets]
        assert seen[1:] == scanned[:24]
        assert reput.reput_from == offsets[24]
        reput.bound = store.commit_log.confirm_offset
        await reput.dispatch_available(store._put_cq)
        assert seen[1:] == scanned
        assert not hints
        assert store.max_offset_in_queue("TopicTest", 0) == 30
        assert reput.reput_from == store.commit_log.max_offset
        got = store.get_message("g", "TopicTest", 0, offset=0, max_count=100)
        assert [decode_record(b).body for b in got.records] == [_msg(i).body for i in range(30)]
        await store.stop()


async def test_message_store_reput_splits_a_hinted_batch_at_a_bound_inside_it(
    tmp_path: Path,
) -> None:
    """1. Stop the background reput; put a batch of 10 (one hint for all of them). 2. Dispatch
    with the bound inside record 4 (controller mode's confirm offset). 3. Put the batch's
    hint back in front, now stale up to record 4. 4. Dispatch with the real bound.
    Expected: after 2, records 0-3 dispatched (equal to the scanned records), the queue at 4
    units and ``reput_from`` at record 4; after 4, all 10 once each, in order, every unit
    right, nothing scanned (the stale hint gave records 4-9) and no hint left."""
    async with asyncio.timeout(30):
        store = MessageStore(_config(tmp_path))
        seen = _record_dispatches(store)
        await store.start()
        reput = store.reput
        await reput.stop(store._put_cq)
        r = await store.put_batch(_batch(range(10)))
        assert r.status is PutMessageStatus.PUT_OK
        hints = store.commit_log.dispatch_hints
        assert [type(h) for h in hints] == [BatchHint]
        hint = hints[0]
        offsets = hint.units[0::3]
        scanned = [read_request(store.commit_log.mfq, o, check_crc=True)[0] for o in offsets]
        reput.bound = lambda: offsets[4] + 10
        await reput.dispatch_available(store._put_cq)
        assert seen == scanned[:4]
        assert store.max_offset_in_queue("TopicTest", 0) == 4
        assert reput.reput_from == offsets[4]
        hints.clear()
        hints.append(hint)
        reput.bound = store.commit_log.confirm_offset
        await reput.dispatch_available(store._put_cq)
        assert seen == scanned
        assert reput.scanned == (0, 0)
        assert not hints
        q = store.queues[("TopicTest", 0)]
        for req in scanned:
            assert req is not None
            unit = q.get_unit(req.consume_queue_offset)
            assert unit is not None
            assert (unit.commit_log_offset, unit.size, unit.tags_code) == (
                req.commit_log_offset, req.msg_size, req.tags_code,
            )  # fmt: skip
        await store.stop()


async def test_message_store_hints_stop_at_their_byte_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1. Bound the hints to 1,000 commit-log bytes; stop the background reput; put 10 single
    messages and 3 batches of 4 (each record about 150 bytes). 2. Dispatch.
    Expected: the hints stop once they span 1,000 bytes (a batch's one counts its records'
    bytes); every record is still dispatched once, in order, equal to the scanned record, and
    the queue holds 22 units."""
    monkeypatch.setattr(commit_log_module, "MAX_HINTED_BYTES", 1000)
    async with asyncio.timeout(30):
        store = MessageStore(_config(tmp_path))
        seen = _record_dispatches(store)
        await store.start()
        await store.reput.stop(store._put_cq)
        offsets = []
        for i in range(10):
            offsets.append((await store.put_message(_msg(i))).wrote_offset)
        for n in range(3):
            r = await store.put_batch(_batch(range(10 + 4 * n, 14 + 4 * n)))
            assert r.status is PutMessageStatus.PUT_OK
        hints = store.commit_log.dispatch_hints
        first = hints[0].commit_log_offset
        assert 0 < len(hints) < 10
        assert all(h.commit_log_offset - first < 1000 for h in hints)
        await store.reput.dispatch_available(store._put_cq)
        assert len(seen) == 22
        for req in seen:
            assert read_request(store.commit_log.mfq, req.commit_log_offset, check_crc=True) == (
                req, req.msg_size,
            )  # fmt: skip
        assert [r.commit_log_offset for r in seen[:10]] == offsets
        assert store.max_offset_in_queue("TopicTest", 0) == 22
        assert not hints
        await store.stop()


async def test_message_store_refuses_transactional_batches(tmp_path: Path) -> None:
    """1. Put a batch flagged prepared, one flagged commit, one flagged rollback. 2. Put a
    plain batch. Expected: the three are MESSAGE_ILLEGAL with nothing appended (as upstream's
    ``asyncPutMessages``: a batch is never transactional); the plain one takes queue offset 0."""
    async with asyncio.timeout(30):
        store = MessageStore(_config(tmp_path))
        await store.start()
        for sys_flag in (TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, 0xC):
            batch = dataclasses.replace(_batch(range(3)), sys_flag=sys_flag)
            assert (await store.put_batch(batch)).status is PutMessageStatus.MESSAGE_ILLEGAL
            assert store.put_batch_nowait(batch) == PutResult(PutMessageStatus.MESSAGE_ILLEGAL)
        assert store.commit_log.max_offset == 0
        r = await store.put_batch(_batch(range(3)))
        assert (r.status, r.queue_offset, r.msg_num) == (PutMessageStatus.PUT_OK, 0, 3)
        await store.stop()


async def test_message_store_batch_runs_build_units_and_tell_arrival_once_per_tag(
    tmp_path: Path,
) -> None:
    """1. With the background reput stopped, put 5 batches of 7 (tags alternate tag0/tag1) to
    queue 0, a single message to queue 1 after each, then a batch of 6 to queue 1 (the
    400-byte consume-queue segments hold 20 units, so runs cross segment ends).
    2. Dispatch. Expected: all 46 records are dispatched once, in commit-log order, equal to
    the scanned record; each consume-queue unit holds its record's offset, size and tags
    code; arrival is told once per queue and tags code of each dispatch pass, with the
    queue's new max offset (fewer times than there are records; each queue's last word is its
    end, for every tags code it holds); the queues end at 35 and 11 units."""
    async with asyncio.timeout(30):
        told: list[tuple[str, int, int, int]] = []
        store = MessageStore(_config(tmp_path), on_arrival=lambda *a: told.append(a))
        seen = _record_dispatches(store)
        await store.start()
        await store.reput.stop(store._put_cq)
        for n in range(5):
            r = await store.put_batch(_batch(range(n * 7, n * 7 + 7)))
            assert (r.status, r.queue_offset, r.msg_num) == (PutMessageStatus.PUT_OK, n * 7, 7)
            assert (await store.put_message(_msg(100 + n, 1))).status is PutMessageStatus.PUT_OK
        items = [(0, m.body, m.properties) for m in map(_msg, range(200, 206))]
        r = await store.put_batch(MessageBatch(topic="TopicTest", queue_id=1, items=items))
        assert (r.status, r.queue_offset) == (PutMessageStatus.PUT_OK, 5)
        await store.reput.dispatch_available(store._put_cq)
        assert store.reput.reput_from == store.commit_log.max_offset
        assert len(seen) == 46
        for req in seen:
            assert read_request(store.commit_log.mfq, req.commit_log_offset, check_crc=True) == (
                req, req.msg_size,
            )  # fmt: skip
        assert [r.commit_log_offset for r in seen] == sorted(r.commit_log_offset for r in seen)
        for req in seen:
            unit = store.queues[("TopicTest", req.queue_id)].get_unit(req.consume_queue_offset)
            assert unit is not None
            assert (unit.commit_log_offset, unit.size, unit.tags_code) == (
                req.commit_log_offset, req.msg_size, req.tags_code,
            )  # fmt: skip
        tag0, tag1 = seen[0].tags_code, seen[1].tags_code
        assert tag0 != tag1
        # Arrival: once per queue and tags code per dispatch pass, with the queue's max offset
        # after the pass (a pass ends at the bound, or after an await for a new unit segment).
        assert 0 < len(told) < len(seen)
        last_of: dict[tuple[int, int], int] = {}
        for topic, queue_id, max_offset, tags in told:
            assert topic == "TopicTest"
            assert max_offset >= last_of.get((queue_id, tags), 0)
            last_of[(queue_id, tags)] = max_offset
        assert {k: v for k, v in last_of.items() if k[0] == 0} == {(0, tag0): 35, (0, tag1): 35}
        assert {k: v for k, v in last_of.items() if k[0] == 1} == {
            (1, r.tags_code): 11 for r in seen if r.queue_id == 1
        }
        assert store.max_offset_in_queue("TopicTest", 0) == 35
        assert store.max_offset_in_queue("TopicTest", 1) == 11
        await store.stop()


async def test_message_store_append_writes_what_encode_record_writes(tmp_path: Path) -> None:
    """1. Start a store; put a single message with an IPv4 born host, one with an IPv6 born host
    and a 200-byte topic (v2), and a batch of two. 2. Read each record's bytes back by offset.
    Expected: the CommitLog's append wrote exactly what encode_record makes of the decoded
    record (the append path packs the same record_struct layout)."""
    async with asyncio.timeout(20):
        store = MessageStore(_config(tmp_path))
        await store.start()
        results = [
            await store.put_message(_msg(1)),
            await store.put_message(
                MessageToStore(  # a v2 record with an IPv6 born host
                    topic="t" * 200,
                    queue_id=0,
                    body=b"v6",
                    born_timestamp=7,
                    born_host=("::1", 4321),
                    properties="TAGS\x01x\x02",
                )
            ),
        ]
        batch = await store.put_batch(_batch([2, 3]))
        offsets = [r.wrote_offset for r in results] + [batch.wrote_offset]
        for offset in offsets:
            raw = store.look_message_by_offset(offset)
            assert raw is not None
            assert raw == encode_record(decode_record(raw))
        await store.stop()
