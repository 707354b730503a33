"""The reput going back for a restarted dispatcher (ReputService.rewind), on a real store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.dispatch import BatchHint, DispatchRequest, Hint
from rocketpy.store.get_types import GetMessageStatus
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration

TOPIC = "TopicTest"


class _Restarted:
    """A dispatcher that works behind the reput, as the index worker does: it keeps the
    offset of each record it is given, in order, reports ``held`` as its last record, and
    calls ``on_dispatch`` (once) from a dispatch: a worker replaced while a pass runs."""

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.held = -1
        self.rewinds: list[int] = []  # len(offsets) at each rewound()
        self.on_dispatch: Callable[[], None] | None = None

    def dispatch(self, request: DispatchRequest, /) -> None:
        self.dispatch_run((request,))

    def dispatch_run(self, run: Sequence[Hint], /) -> None:
        for hint in run:
            if isinstance(hint, BatchHint):
                self.offsets += hint.units[0::3]
            else:
                self.offsets.append(hint.commit_log_offset)
        if self.on_dispatch is not None:
            call, self.on_dispatch = self.on_dispatch, None
            call()

    def backlogged(self) -> bool:
        return False

    def last_held(self) -> int:
        return self.held

    async def drain(self) -> None:
        return None

    def rewound(self) -> None:
        self.rewinds.append(len(self.offsets))


@contextlib.asynccontextmanager
async def _ten_dispatched(root: Path) -> AsyncIterator[tuple[MessageStore, _Restarted]]:
    """A started store whose first 10 records reached a :class:`_Restarted` dispatcher;
    stopped on the way out."""
    config = MessageStoreConfig.build({
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": 1 << 20,
        "mappedFileSizeConsumeQueue": 4000,
    })  # fmt: skip
    store = MessageStore(config)
    d = _Restarted()
    store.register_dispatcher(d)
    await store.start()
    try:
        await _put(store, range(10))
        await wait_until(lambda: len(d.offsets) == 10, 5)
        yield store, d
    finally:
        await store.stop()


async def _put(store: MessageStore, numbers: range) -> None:
    for i in numbers:
        msg = MessageToStore(topic=TOPIC, queue_id=0, body=f"m{i}".encode(), properties="")
        assert (await store.put_message(msg)).status is PutMessageStatus.PUT_OK


def _queue(store: MessageStore) -> int:
    got = store.get_message("g", TOPIC, 0, offset=0, max_count=100)
    assert got.status is GetMessageStatus.FOUND
    return len(got.records)


async def test_rewind_dispatches_again_from_the_dispatchers_last_record(tmp_path: Path) -> None:
    """1. A store dispatches 10 records to a dispatcher behind the reput. 2. It restarts
    holding records up to the 4th: the store rewinds for it.
    Expected: it is told rewound() once and then given records 4..10 again, in order; the
    consume queue still holds 10 units (none written twice)."""
    async with asyncio.timeout(20), _ten_dispatched(tmp_path) as (store, d):
        first = list(d.offsets)
        d.held = first[3]
        store.rewind_dispatch(d)
        await wait_until(lambda: len(d.offsets) == 17, 5)
        assert d.rewinds == [10]
        assert d.offsets[10:] == first[3:]
        assert store.max_offset_in_queue(TOPIC, 0) == 10
        assert _queue(store) == 10


async def test_a_rewind_asked_during_a_pass_comes_after_it(tmp_path: Path) -> None:
    """1. 10 records dispatched. 2. The dispatcher restarts (holding up to the 6th) while the
    reput dispatches records 10..14 to it: it asks for the rewind from inside that pass.
    Expected: rewound() comes after the pass (the pass would otherwise move the reput past
    the rewind again), and then the dispatcher is given records 6..15 in order; the consume
    queue holds 15 units."""
    async with asyncio.timeout(20), _ten_dispatched(tmp_path) as (store, d):
        d.held = d.offsets[5]

        def restarted() -> None:
            store.rewind_dispatch(d)

        d.on_dispatch = restarted
        await _put(store, range(10, 15))
        await wait_until(lambda: bool(d.rewinds) and len(d.offsets) - d.rewinds[0] == 10, 5)
        assert store.max_offset_in_queue(TOPIC, 0) == 15
        (at,) = d.rewinds
        assert at > 10  # after the pass that asked for it
        every = sorted(set(d.offsets))
        assert len(every) == 15
        assert d.offsets[at:] == every[5:]
        assert _queue(store) == 15


async def test_a_dispatcher_holding_nothing_is_given_the_whole_log_again(tmp_path: Path) -> None:
    """1. 10 records dispatched. 2. The dispatcher restarts holding no record at all (a
    replaced index worker whose files are gone, or that died before its first).
    Expected: rewound() once, then it is given all 10 records again from the log's first, in
    order; the consume queue still holds 10 units."""
    async with asyncio.timeout(20), _ten_dispatched(tmp_path) as (store, d):
        first = list(d.offsets)
        d.held = -1
        store.rewind_dispatch(d)
        await wait_until(lambda: len(d.offsets) == 20, 5)
        assert d.rewinds == [10]
        assert d.offsets[10:] == first
        assert store.max_offset_in_queue(TOPIC, 0) == 10
        assert _queue(store) == 10
