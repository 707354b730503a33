"""IndexService: dispatch, roll-over to new files, queries across files, deletion, reload."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.clock import ManualClock
from rocketpy.common.errors import ConfigError, StoreError
from rocketpy.common.message.properties import encode_properties
from rocketpy.store.checkpoint import StoreCheckpoint
from rocketpy.store.dispatch import BatchHint, DispatchRequest
from rocketpy.store.index.index_file import IndexFile
from rocketpy.store.index.index_service import IndexService
from rocketpy.store.index.record import is_index_file_name

T0 = 1_700_000_000_000
FAR = 2**62


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-test") as pool:
        yield pool


def _dispatch(
    service: IndexService,
    offset: int,
    ts: int,
    *,
    keys: str = "",
    uniq: str | None = None,
    sys_flag: int = 0,
) -> None:
    """Dispatch a record of topic ``T`` whose properties carry ``keys`` and ``uniq``."""
    props = {"KEYS": keys or None, "UNIQ_KEY": uniq}
    service.dispatch(
        DispatchRequest("T", 0, offset, 100, 0, ts, 0, encode_properties(props), sys_flag, 0)
    )


def _service(
    root: Path, executor: ThreadPoolExecutor, checkpoint: StoreCheckpoint | None = None
) -> IndexService:
    return IndexService(
        root / "index",
        hash_slot_num=4,
        index_num=5,  # 4 entries per file
        alloc_executor=executor,
        flush_executor=executor,
        clock=ManualClock(T0),
        tz=UTC,
        checkpoint=checkpoint,
    )


@pytest.fixture
async def service(tmp_path: Path, executor: ThreadPoolExecutor) -> AsyncIterator[IndexService]:
    svc = _service(tmp_path, executor)
    async with asyncio.timeout(5):
        await svc.load(last_exit_ok=True)
        await svc.start()
    yield svc
    async with asyncio.timeout(5):
        await svc.stop()


async def _settled(svc: IndexService) -> None:
    """Wait until no key waits for a file."""
    await wait_until(lambda: svc.statistics().pending_keys == 0, 5)


async def test_index_service_indexes_uniq_key_and_keys(service: IndexService) -> None:
    """1. Dispatch a message with UNIQ_KEY "U1" and KEYS "k1  k2" (double space) at offset 100.
    Expected: each of U1, k1, k2 finds offset 100; an empty key is not indexed."""
    _dispatch(service, 100, T0, keys="k1  k2", uniq="U1")
    for key in ("U1", "k1", "k2"):
        assert service.query_offsets("T", key, 10, 0, FAR).phy_offsets == (100,)
    assert service.query_offsets("T", "", 10, 0, FAR).phy_offsets == ()
    assert service.query_offsets("Other", "k1", 10, 0, FAR).phy_offsets == ()


async def test_index_service_rolls_over_and_queries_newest_first(service: IndexService) -> None:
    """1. Four entries fit in a file. 2. Dispatch 10 messages with key "k" (and unique keys),
    one second apart, offsets 0, 100, ... 900. 3. Query "k".
    Expected: 5 files (20 entries / 4); results newest first across files; file names are
    17-digit creation times in increasing order; maxMsgsNumBatch caps the result."""
    for i in range(10):
        _dispatch(service, i * 100, T0 + i * 1000, keys=f"k u{i}")
        await _settled(service)
    stats = service.statistics()
    assert len(stats.file_names) == 5
    assert all(is_index_file_name(n) for n in stats.file_names)
    assert list(stats.file_names) == sorted(set(stats.file_names))
    result = service.query_offsets("T", "k", 64, 0, FAR)
    assert result.phy_offsets == tuple(range(900, -1, -100))
    assert (result.index_last_update_phyoffset, result.index_last_update_timestamp) == (
        900,
        T0 + 9000,
    )
    assert service.query_offsets("T", "u3", 64, 0, FAR).phy_offsets == (300,)
    assert service.query_offsets("T", "k", 3, 0, FAR).phy_offsets == (900, 800, 700)


async def test_index_service_time_range_query(service: IndexService) -> None:
    """Dispatch key "k" at t0 .. t0+9 s across several files; query [t0+3 s, t0+6 s].
    Expected: offsets 600..300, newest first."""
    for i in range(10):
        _dispatch(service, i * 100, T0 + i * 1000, keys="k")
        await _settled(service)
    result = service.query_offsets("T", "k", 64, T0 + 3000, T0 + 6000)
    assert result.phy_offsets == (600, 500, 400, 300)


async def test_index_service_burst_waits_for_spare(service: IndexService) -> None:
    """1. Dispatch 8 single-key messages without yielding to the loop, so the spare file
    cannot be created meanwhile: 4 fit the current file, 4 wait.
    Expected: the waiting keys land once the spare exists; nothing dropped; all found."""
    for i in range(8):
        _dispatch(service, i * 10, T0 + i, keys=f"b{i}")
    assert service.statistics().pending_keys == 4
    await _settled(service)
    assert service.statistics().dropped_keys == 0
    for i in range(8):
        assert service.query_offsets("T", f"b{i}", 4, 0, FAR).phy_offsets == (i * 10,)


async def test_index_service_burst_beyond_bound_is_dropped(service: IndexService) -> None:
    """1. Dispatch 12 keys without yielding: 4 fit, 5 wait (the bound: one file's worth),
    3 more are dropped and counted (upstream would block the reput thread).
    Expected: dropped_keys == 3; the first 9 keys are found, the last 3 are not."""
    for i in range(12):
        _dispatch(service, i * 10, T0 + i, keys=f"b{i}")
    await _settled(service)
    assert service.statistics().dropped_keys == 3
    found = [bool(service.query_offsets("T", f"b{i}", 4, 0, FAR).phy_offsets) for i in range(12)]
    assert found == [True] * 9 + [False] * 3


async def test_index_service_skips_redispatch_and_rollback(service: IndexService) -> None:
    """1. Dispatch offset 500. 2. Re-dispatch offset 400 (recovery replay). 3. Dispatch a
    rolled-back transaction record (sysflag 12) at 600.
    Expected: only 500 is indexed."""
    _dispatch(service, 500, T0, keys="k")
    _dispatch(service, 400, T0, keys="k")
    _dispatch(service, 600, T0, keys="k", sys_flag=0x3 << 2)
    assert service.query_offsets("T", "k", 10, 0, FAR).phy_offsets == (500,)


async def test_index_service_delete_expired_files(service: IndexService) -> None:
    """1. Fill 3 files (offsets 0..1100, 4 per file). 2. Delete below offset 800.
    Expected: the two files ending at 300 and 700 are deleted; the newest one never is, even
    when everything is below the offset."""
    for i in range(12):
        _dispatch(service, i * 100, T0 + i * 1000, keys="k")
        await _settled(service)
    names = service.statistics().file_names
    assert len(names) == 3
    assert await service.delete_expired_files(800) == 2
    assert service.statistics().file_names == names[2:]
    assert service.query_offsets("T", "k", 64, 0, FAR).phy_offsets == (1100, 1000, 900, 800)
    assert await service.delete_expired_files(10**9) == 0
    assert service.statistics().file_names == names[2:]


async def _six_keys_then_stop(tmp_path: Path, executor: ThreadPoolExecutor) -> tuple[str, ...]:
    """Index key ``k`` of 6 messages (offsets 0..500: two files), stop; the files' names."""
    svc = _service(tmp_path, executor)
    async with asyncio.timeout(5):
        await svc.load(last_exit_ok=True)
        await svc.start()
        for i in range(6):
            _dispatch(svc, i * 100, T0 + i * 1000, keys="k")
            await _settled(svc)
        names = svc.statistics().file_names
        await svc.stop()
    return names


async def test_index_service_reload_after_clean_stop(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    """1. Index 6 messages (2 files), stop (the unused spare is deleted). 2. Load a new
    service from the same directory. Expected: same files, same answers; new keys go on
    into the last, not yet full file."""
    names = await _six_keys_then_stop(tmp_path, executor)
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == list(names)
    again = _service(tmp_path, executor)
    async with asyncio.timeout(5):
        await again.load(last_exit_ok=True)
        await again.start()
        assert again.statistics().file_names == names
        assert again.query_offsets("T", "k", 64, 0, FAR).phy_offsets == (500, 400, 300, 200, 100, 0)
        _dispatch(again, 600, T0 + 6000, keys="k")
        assert again.statistics().file_names == names
        assert again.query_offsets("T", "k", 1, 0, FAR).phy_offsets == (600,)
        await again.stop()


async def test_index_service_abnormal_exit_drops_files_newer_than_checkpoint(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    """1. With a checkpoint, index 6 messages: the first file fills and is flushed, so the
    checkpoint's indexMsgTimestamp = its end (t0+3 s). 2. Load again as after a crash.
    Expected: the checkpoint was updated; the second file (end t0+5 s > checkpoint) is
    destroyed, the first is kept (recovery re-dispatches the rest)."""
    checkpoint = StoreCheckpoint.open(tmp_path / "checkpoint")
    svc = _service(tmp_path, executor, checkpoint=checkpoint)
    async with asyncio.timeout(5):
        await svc.load(last_exit_ok=True)
        await svc.start()
        for i in range(6):
            _dispatch(svc, i * 100, T0 + i * 1000, keys="k")
            await _settled(svc)
        await wait_until(lambda: checkpoint.index_msg_timestamp == T0 + 3000, 5)
        names = svc.statistics().file_names
        await svc.stop()
    checkpoint.close()
    assert StoreCheckpoint.open(tmp_path / "checkpoint").index_msg_timestamp == T0 + 3000
    again = _service(tmp_path, executor, checkpoint=StoreCheckpoint.open(tmp_path / "checkpoint"))
    async with asyncio.timeout(5):
        await again.load(last_exit_ok=False)
        assert again.statistics().file_names == names[:1]
        await again.start()
        assert again.query_offsets("T", "k", 64, 0, FAR).phy_offsets == (300, 200, 100, 0)
        await again.stop()


async def test_index_service_file_names_unique_when_clock_stands_still(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    """The manual clock never moves: each new file is named one millisecond after the last."""
    svc = _service(tmp_path, executor)
    async with asyncio.timeout(5):
        await svc.load(last_exit_ok=True)
        await svc.start()
        for i in range(9):
            _dispatch(svc, i, T0, keys=f"k{i}")
            await _settled(svc)
        names = svc.statistics().file_names
        await svc.stop()
    assert names == ("20231114221320000", "20231114221320001", "20231114221320002")


async def test_index_service_destroy_and_errors(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    """destroy() removes every file; start() before load() and impossible sizes are errors."""
    with pytest.raises(ConfigError, match="maxIndexNum"):
        IndexService(tmp_path, index_num=1)
    svc = _service(tmp_path, executor)
    async with asyncio.timeout(5):
        with pytest.raises(StoreError, match="before load"):
            await svc.start()
        await svc.load(last_exit_ok=True)
        await svc.start()
        _dispatch(svc, 1, T0, keys="k")
        await svc.destroy()
    assert list((tmp_path / "index").iterdir()) == []


async def test_index_service_load_drops_empty_spare_left_by_crash(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    """1. Index 2 messages; stop. 2. Leave an empty index file named after the others (the
    spare a crash would leave). 3. Load (the data file is covered by the checkpoint, so only the
    emptiness matters) and query from just before t0.
    Expected: the empty file is deleted at load and the query still finds both messages."""
    svc = _service(tmp_path, executor)
    async with asyncio.timeout(5):
        await svc.load(last_exit_ok=True)
        await svc.start()
        _dispatch(svc, 0, T0, keys="k")
        _dispatch(svc, 100, T0 + 1000, keys="k")
        await svc.stop()
    IndexFile.create(tmp_path / "index" / "29991231235959999", 4, 5).close()
    again = _service(tmp_path, executor)
    async with asyncio.timeout(5):
        await again.load(last_exit_ok=True)
        assert "29991231235959999" not in again.statistics().file_names
        await again.start()
        assert again.query_offsets("T", "k", 64, T0 - 1, FAR).phy_offsets == (100, 0)
        await again.stop()


def _run_records(base: int, keys: str) -> list[DispatchRequest]:
    """A run of three records from ``base``: ``keys`` and a UNIQ_KEY, a rollback (not indexed),
    a UNIQ_KEY alone; at most 5 keys, what may wait for a file (``index_num``)."""
    out = []
    for i, (k, flag) in enumerate([(keys, 0), ("r", 0b1100), ("", 0)]):
        props = encode_properties({"KEYS": k or None, "UNIQ_KEY": f"U{base + i}"})
        out.append(
            DispatchRequest("T", 0, base + 100 * i, 100, 0, T0 + 1500 * i, i, props, flag, 0)
        )
    return out


def _assert_same_files(one: Path, other: Path) -> None:
    """The two services' index files hold the same bytes (at least 3 files)."""

    def files(svc_root: Path) -> list[bytes]:
        return [p.read_bytes() for p in sorted((svc_root / "index").iterdir())]

    assert len(files(one)) >= 3
    assert files(one) == files(other)


async def test_index_service_dispatch_run_writes_the_bytes_of_per_record_dispatch(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    """1. Dispatch the same runs into two services (4 entries per file, so runs cross file
    ends): one record at a time, and a run per call; one run starts below the indexed offset
    (re-dispatch) for its first records.
    Expected: the same index files, byte for byte, and the same query answers."""
    one, run = _service(tmp_path / "one", executor), _service(tmp_path / "run", executor)
    runs = [
        _run_records(base, keys)
        for base, keys in [(1000, "k0"), (1500, "a b  c"), (1600, "k0"), (3000, ""), (4000, "k0")]
    ]
    async with asyncio.timeout(10):
        for svc in (one, run):
            await svc.load(last_exit_ok=True)
            await svc.start()
        for records in runs:
            for req in records:
                one.dispatch(req)
            run.dispatch_run(records)
            await _settled(one)
            await _settled(run)
        k0 = run.query_offsets("T", "k0", 50, 0, FAR)
        assert k0 == one.query_offsets("T", "k0", 50, 0, FAR)
        assert k0.phy_offsets == (4000, 1000)  # 1600 lies below 1700, indexed by then
        assert run.query_offsets("T", "c", 50, 0, FAR).phy_offsets == (1500,)
        # File names are creation times and the spare is made off the loop: both may differ.
        r, o = run.statistics(), one.statistics()
        assert (len(r.file_names), r.pending_keys, r.dropped_keys) == (
            len(o.file_names),
            o.pending_keys,
            o.dropped_keys,
        )
        for svc in (one, run):
            await svc.stop()
    _assert_same_files(tmp_path / "one", tmp_path / "run")


def _batch_hint(base: int, count: int, keys: str, *, uniqs: bool = True) -> BatchHint:
    """A hinted batch of ``count`` 100-byte records from offset ``base``, each with UNIQ_KEY
    ``U<offset>`` (also in the hint's ``uniqs`` with ``uniqs``) and KEYS ``keys``."""
    units: list[int] = []
    texts = []
    for i in range(count):
        units += (base + 100 * i, 100, 0)
        texts.append(encode_properties({"KEYS": keys or None, "UNIQ_KEY": f"U{base + 100 * i}"}))
    ids = [f"U{base + 100 * i}" for i in range(count)] if uniqs else None
    return BatchHint("T", 0, T0 + base, base // 100, 0, units, texts, ids)


async def test_index_service_batch_hint_writes_the_bytes_of_its_records(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    """1. Dispatch the same batches into two services (4 entries per file, so batches cross
    file ends): record by record (the hint's requests), and each hint in a run, one run with a
    single record before it; the third batch starts below the indexed offset (re-dispatch); the
    first hint without the UNIQ_KEYs (read from the properties), the others with them; the last
    one all new with UNIQ_KEYs and no KEYS (the usual batch).
    Expected: the same index files, byte for byte, and the same query answers."""
    one, run = _service(tmp_path / "one", executor), _service(tmp_path / "run", executor)
    single = DispatchRequest("T", 1, 500, 100, 0, T0, 0, "UNIQ_KEY\x01S\x02", 0, 0)
    hints = [
        _batch_hint(1000, 3, "k0", uniqs=False),
        _batch_hint(1300, 2, "a b"),
        _batch_hint(1350, 3, ""),
        _batch_hint(1700, 3, ""),  # the usual batch: all new, UNIQ_KEYs only
    ]
    async with asyncio.timeout(10):
        for svc in (one, run):
            await svc.load(last_exit_ok=True)
            await svc.start()
        one.dispatch(single)
        run.dispatch_run([single, hints[0]])
        for hint in hints:
            for req in hint.requests():
                one.dispatch(req)
            if hint is not hints[0]:
                run.dispatch_run([hint])
            await _settled(one)
            await _settled(run)
        k0 = run.query_offsets("T", "k0", 50, 0, FAR)
        assert k0 == one.query_offsets("T", "k0", 50, 0, FAR)
        assert k0.phy_offsets == (1200, 1100, 1000)
        assert run.query_offsets("T", "U1350", 50, 0, FAR).phy_offsets == ()
        assert run.query_offsets("T", "U1450", 50, 0, FAR).phy_offsets == (1450,)
        assert run.query_offsets("T", "U1300", 50, 0, FAR).phy_offsets == (1300,)
        assert run.query_offsets("T", "U1800", 50, 0, FAR).phy_offsets == (1800,)
        for svc in (one, run):
            await svc.stop()
    _assert_same_files(tmp_path / "one", tmp_path / "run")


async def test_index_service_load_deletes_files_a_crash_left_unsized(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    """1. Index 6 messages, stop. 2. Add what a kill during a file's creation leaves: a
    0-byte index file (created, never sized: what the chaos suite found after a SIGKILL) and
    a file still under its temporary name. 3. Load a new service.
    Expected: it starts (no StoreError), both leftovers are deleted, the real files load and
    answer as before; a new file is created with no temporary name left behind."""
    names = await _six_keys_then_stop(tmp_path, executor)
    index_dir = tmp_path / "index"
    empty = index_dir / "29991231235959999"
    empty.touch()
    unfinished = index_dir / "29991231235959998.tmp"
    unfinished.write_bytes(b"\0" * 100)
    again = _service(tmp_path, executor)
    async with asyncio.timeout(5):
        await again.load(last_exit_ok=True)
        await again.start()
        assert not empty.exists()
        assert not unfinished.exists()
        assert again.statistics().file_names == names
        assert again.query_offsets("T", "k", 64, 0, FAR).phy_offsets == (500, 400, 300, 200, 100, 0)
        await again.stop()
    assert not [p for p in index_dir.iterdir() if p.name.endswith(".tmp")]
