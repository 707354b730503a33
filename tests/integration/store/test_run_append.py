"""The send lane's run append (``Appender.run``): single messages written as one batch per queue."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.clock import ManualClock
from rocketpy.common.message.decoder import decode_record
from rocketpy.common.message.record import TRANSACTION_PREPARED_TYPE
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.consume_queue.reput import read_request
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration

HOSTS = (("127.0.0.1", 5000), ("::1", 6000))


def _config(root: Path) -> MessageStoreConfig:
    return MessageStoreConfig.build({
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": 4096,
        "mappedFileSizeConsumeQueue": 400,
        "flushDiskType": "ASYNC_FLUSH",
    })  # fmt: skip


def _msg(i: int) -> MessageToStore:
    """Message ``i`` of a run: queue ``i % 2`` (each queue's with one born host), its own
    flag, born time, reconsume count, body and properties."""
    return MessageToStore(
        topic="TopicRun", queue_id=i % 2, body=f"body-{i}".encode() * (i + 1), flag=i,
        born_timestamp=1000 + i, born_host=HOSTS[i % 2], reconsume_times=i % 3,
        properties=f"TAGS\x01t{i % 3}\x02KEYS\x01k{i}\x02UNIQ_KEY\x01U{i}\x02",
    )  # fmt: skip


async def test_a_run_writes_what_single_puts_in_queue_order_write(tmp_path: Path) -> None:
    """1. Two stores on one manual clock. 2. Into the first, put messages 0..7 one by one in
    the order the run writes them (queue 0's in run order, then queue 1's). 3. Into
    the second, append the 8 as one run. Expected: byte-identical commit logs; the run's
    (msg id, queue offset) of each message, in run order, are those its single put got; the
    reput's requests from the run's hints equal the records scanned back, and each queue
    holds its messages in run order."""
    async with asyncio.timeout(20):
        clock = ManualClock()
        one = MessageStore(_config(tmp_path / "one"), clock=clock)
        run = MessageStore(_config(tmp_path / "run"), clock=clock)
        await one.start()
        await run.start()
        for store in (one, run):  # the first segment (a run never makes one)
            first = _msg(100)
            assert (await store.put_message(first)).status is PutMessageStatus.PUT_OK
        msgs = [_msg(i) for i in range(8)]
        order = sorted(range(8), key=lambda i: (i % 2, i))  # queue 0's, then queue 1's
        singles = {i: await one.put_message(msgs[i]) for i in order}
        appender = run.commit_log.nowait_appender()
        assert appender is not None
        stored = appender.run(msgs, [f"U{i}" for i in range(8)])
        run.commit_log.appended()
        assert stored == [(singles[i].msg_id, singles[i].queue_offset) for i in range(8)]
        end = one.commit_log.max_offset
        assert run.commit_log.max_offset == end
        assert run.commit_log.read_raw(0, end) == one.commit_log.read_raw(0, end)
        await wait_until(lambda: run.reput.reput_from == end, 5)
        for q in (0, 1):
            got = run.get_message("g", "TopicRun", q, offset=0, max_count=32)
            bodies = [decode_record(b).body for b in got.records]
            expected = [_msg(100).body] if q == 0 else []
            assert bodies == expected + [msgs[i].body for i in range(q, 8, 2)]
            for raw in got.records:
                record = decode_record(raw)
                request, _ = read_request(
                    run.commit_log.mfq, record.physical_offset, check_crc=True
                )
                assert request is not None
                assert request.consume_queue_offset == record.queue_offset
        await one.stop()
        await run.stop()


@pytest.mark.parametrize(
    "bad",
    [
        {"sys_flag": TRANSACTION_PREPARED_TYPE},
        {"body": b"x" * (4 * 1024 * 1024 + 1)},
        {"flag": 2**31},
        {"body": b"y" * 4000},  # does not fit what is left of the 4 KiB segment
        {"sys_flag": 1},  # not the sys flag of its queue's first message
        {"born_host": ("127.0.0.2", 1)},  # not the born host of its queue's first message
    ],
)
async def test_a_run_that_is_not_all_plain_or_does_not_fit_writes_nothing(
    tmp_path: Path, bad: dict[str, object]
) -> None:
    """A run of 4 to queue 0 whose last message is transactional, too large, has a field out
    of range, passes the segment's end, or differs in sys flag or born host from the first
    message of its queue; and a run of 3 plain messages to 3 queues (under two a queue: single
    records cost less). Expected: None, and nothing written (the log's end, the queue offsets
    and the hints unchanged); each message then goes alone."""
    async with asyncio.timeout(20):
        store = MessageStore(_config(tmp_path))
        await store.start()
        assert (await store.put_message(_msg(100))).status is PutMessageStatus.PUT_OK
        end = store.commit_log.max_offset
        table = dict(store.commit_log.topic_queue_table)
        hints = len(store.commit_log.dispatch_hints)
        fields = {f: getattr(_msg(6), f) for f in MessageToStore.__dataclass_fields__}
        last = MessageToStore(**{**fields, **bad})  # type: ignore[arg-type]
        appender = store.commit_log.nowait_appender()
        assert appender is not None
        run = [_msg(0), _msg(2), _msg(4), last]  # queue 0 (the even ones), one born host
        assert appender.run(run, ["U0", "U2", "U4", "U6"]) is None
        spread = [_msg(1), _msg(100), dataclasses.replace(_msg(3), queue_id=2)]
        assert appender.run(spread, ["U1", "U100", "U3"]) is None
        assert store.commit_log.max_offset == end
        assert store.commit_log.topic_queue_table == table
        assert len(store.commit_log.dispatch_hints) == hints
        await store.stop()
