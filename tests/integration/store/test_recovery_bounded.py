"""Recovery whose cost is what was written since the last dispatch, not the log (issue 24).

Real stores on real files: where the walk starts after a clean stop, after a crash of the
process and after a crash of the machine; the torn tail; the segment made ahead of need; the
consume queues' bisection; a slave's checkpoint timestamp; the store lock.
"""

from __future__ import annotations

import asyncio
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.message.decoder import decode_record
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.consume_queue.consume_queue import ConsumeQueue
from rocketpy.store.consume_queue.unit import UNIT_SIZE, CqUnit
from rocketpy.store.message_store import MessageStore
from rocketpy.store.run_files import current_boot_id

pytestmark = pytest.mark.integration
SEGMENT = 4096


def _config(root: Path, **extra: str | int) -> MessageStoreConfig:
    keys: dict[str, str | int] = {
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": SEGMENT,
        "mappedFileSizeConsumeQueue": 400,
        "flushIntervalCommitLog": 50,
    }
    return MessageStoreConfig.build({**keys, **extra})


def _msg(i: int, queue_id: int = 0) -> MessageToStore:
    return MessageToStore(topic="Recover", queue_id=queue_id, body=f"m{i}-".encode() * 9)


async def _fill(store: MessageStore, count: int) -> list[int]:
    """Put ``count`` messages over two queues; wait until dispatched; their offsets."""
    offsets = []
    for i in range(count):
        r = await store.put_message(_msg(i, i % 2))
        assert r.status is PutMessageStatus.PUT_OK
        offsets.append(r.wrote_offset)
    top = store.commit_log.max_offset
    await wait_until(lambda: store.reput.reput_from >= top, 5)
    return offsets


async def _filled(cfg: MessageStoreConfig, count: int) -> int:
    """Start a store on ``cfg``, :func:`_fill` it, stop it cleanly; the log's end offset."""
    store = MessageStore(cfg)
    await store.start()
    await _fill(store, count)
    end = store.commit_log.max_offset
    assert len(store.commit_log.mfq.files) > 3
    await store.stop()
    return end


async def test_recovery_clean_stop_walks_nothing(tmp_path: Path) -> None:
    """1. Put 200 messages (several 4 KiB segments), stop cleanly. 2. Start again.
    Expected: the walk starts at the dispatched boundary, which is the log's end, and scans
    0 bytes; every message reads back and the queues continue."""
    async with asyncio.timeout(30):
        end = await _filled(_config(tmp_path), 200)
        again = MessageStore(_config(tmp_path))
        await again.start()
        try:
            rec = again.recovery
            assert rec is not None
            assert (rec.start_from, rec.walk_start, rec.scanned_bytes) == ("dispatched", end, 0)
            assert again.max_offset_in_queue("Recover", 0) == 100
            r = await again.put_message(_msg(200))
            assert r.queue_offset == 100
        finally:
            await again.stop()


async def test_recovery_same_boot_crash_walks_only_the_undispatched_tail(tmp_path: Path) -> None:
    """1. Put 100 messages, stop cleanly. 2. Append 10 more records to the commit log by hand
    (written, never dispatched: what a SIGKILL between append and dispatch leaves) and write
    ``abort`` as a store of this boot does. 3. Start.
    Expected: the walk starts at the dispatched boundary and scans exactly those 10 records;
    they are re-dispatched (queue lengths 55/55) and read back."""
    async with asyncio.timeout(30):
        cfg = _config(tmp_path)
        written_end = await _filled(cfg, 110)
        # Forget the last 10 records' units: the queues end where dispatch had got to.
        tail_start = await _drop_last_units(cfg, 10)
        cfg.abort_path.write_text(f"{os.getpid()}\nbootId={current_boot_id()}\n")

        again = MessageStore(cfg)
        await again.start()
        try:
            rec = again.recovery
            assert rec is not None
            assert rec.start_from == "dispatched"
            assert (rec.walk_start, rec.process_offset) == (tail_start, written_end)
            assert rec.scanned_bytes == written_end - tail_start
            assert again.max_offset_in_queue("Recover", 0) == 55
            assert again.max_offset_in_queue("Recover", 1) == 55
            got = again.get_message("g", "Recover", 1, offset=54, max_count=1)
            assert decode_record(got.records[0]).body == _msg(109).body
        finally:
            await again.stop()


async def _drop_last_units(cfg: MessageStoreConfig, count: int) -> int:
    """Cut the last ``count`` records' units from the queues (as if never dispatched);
    returns the commit-log offset of the first record cut."""
    queues = [ConsumeQueue(cfg.consume_queue_dir, "Recover", q, 400) for q in (0, 1)]
    for q in queues:
        q.recover()
    units = sorted(
        ((u.commit_log_offset, q) for q in queues for n in range(q.max_offset)
         if (u := q.get_unit(n)) is not None),
        key=lambda t: t[0],
    )  # fmt: skip
    first_cut = units[-count][0]
    for q in queues:
        q.truncate_by_commit_log(first_cut)
        q.close()
    return first_cut


async def test_recovery_machine_crash_uses_checkpoint_segment(tmp_path: Path) -> None:
    """1. Put 200 messages, stop cleanly. 2. Write ``abort`` without a boot id (a store of
    another boot, or a Java broker, left it: the page cache may have lost writes). 3. Start.
    Expected: the walk starts at a segment start (the checkpoint's), never beyond the
    dispatched boundary's segment, ends at the log's end; nothing is lost."""
    async with asyncio.timeout(30):
        cfg = _config(tmp_path)
        end = await _filled(cfg, 200)
        cfg.abort_path.write_text("12345")

        again = MessageStore(cfg)
        await again.start()
        try:
            rec = again.recovery
            assert rec is not None
            assert rec.start_from == "checkpoint"
            assert rec.walk_start % SEGMENT == 0
            assert rec.process_offset == end
            assert again.max_offset_in_queue("Recover", 0) == 100
        finally:
            await again.stop()


async def test_recovery_torn_record_copied_alone_and_zeroed(tmp_path: Path) -> None:
    """1. Put 12 messages (one segment), stop. 2. Overwrite the 6th record's body with garbage
    (records 7-12 stay valid behind it) and mark a crash. 3. Start: the log ends at record 6.
    4. Put one message, stop, mark a crash again, start.
    Expected: step 3 keeps a copy of exactly record 6's bytes and zeroes it and what follows;
    step 4 finds 6 messages in all: records 7-12 never come back behind the new one."""
    async with asyncio.timeout(30):
        cfg = _config(tmp_path)
        store = MessageStore(cfg)
        await store.start()
        offsets = await _fill(store, 12)
        size = offsets[6] - offsets[5]
        assert offsets[-1] < SEGMENT - size
        await store.stop()
        seg = cfg.commit_log_dir / f"{0:020d}"
        data = bytearray(seg.read_bytes())
        data[offsets[5] + size - 20 : offsets[5] + size - 4] = b"\xee" * 16
        seg.write_bytes(bytes(data))
        cfg.abort_path.write_text("1")

        again = MessageStore(cfg)
        await again.start()
        rec = again.recovery
        assert rec is not None
        assert rec.process_offset == offsets[5]
        assert rec.cut_copy is not None
        torn = bytes(data[offsets[5] : offsets[5] + size])
        assert rec.cut_copy.read_bytes() == torn.rstrip(b"\0")
        assert seg.read_bytes()[offsets[5] : offsets[-1] + size] == bytes(offsets[-1] + size
                                                                         - offsets[5])  # fmt: skip
        await again.put_message(_msg(99, 1))
        await again.stop()
        cfg.abort_path.write_text("1")

        third = MessageStore(cfg)
        await third.start()
        try:
            total = third.max_offset_in_queue("Recover", 0) + third.max_offset_in_queue(
                "Recover", 1
            )
            assert total == 6
        finally:
            await third.stop()


def _rss_kb_of_mapping(path: Path) -> int | None:
    """Resident kB of this process's mapping of ``path`` (None when not mapped)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(str(path)):
            for follow in lines[i + 1 : i + 25]:
                if follow.startswith("Rss:"):
                    return int(follow.split()[1])
    return None


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
async def test_recovery_default_segment_size_reads_only_what_is_written(tmp_path: Path) -> None:
    """1. A store with the default 1 GiB segments (a 1 GiB segment costs nothing until
    written): put 2,000 messages, stop; the segment after the first is created ahead. 2. Mark
    a machine crash (no boot id) and start: the walk covers the written bytes.
    Expected: the walk ends at the log's end and stops there; the segment created ahead was
    never paged in (0 kB resident); all 2,000 messages are there."""
    async with asyncio.timeout(60):
        cfg = MessageStoreConfig.build({"storePathRootDir": str(tmp_path)})
        store = MessageStore(cfg)
        await store.start()
        for i in range(2000):
            await store.put_message(_msg(i, i % 2))
        end = store.commit_log.max_offset
        await wait_until(lambda: store.reput.reput_from >= end, 10)
        await store.stop()
        ahead = cfg.commit_log_dir / f"{cfg.mapped_file_size_commit_log:020d}"
        ahead.touch()  # as a crash leaves the segment that was being created ahead
        os.truncate(ahead, cfg.mapped_file_size_commit_log)
        cfg.abort_path.write_text("1")

        again = MessageStore(cfg)
        await again.start()
        try:
            rec = again.recovery
            assert rec is not None
            assert (rec.walk_start, rec.process_offset, rec.cut_bytes) == (0, end, 0)
            assert _rss_kb_of_mapping(ahead) in (None, 0)
            assert again.max_offset_in_queue("Recover", 0) == 1000
        finally:
            await again.stop()


def test_consume_queue_recover_bisects_to_the_exact_end(tmp_path: Path) -> None:
    """1. A queue of 20-unit segments gets 47 units (three segments, the last partial).
    2. Reopen. 3. Truncate to the units below commit-log offset 3000 (zeroing the cut), reopen.
    Expected: 47 units, max physical offset of the last; then 30 units exactly."""
    q = ConsumeQueue(tmp_path, "T", 0, 400)
    with ThreadPoolExecutor(1) as alloc:
        for n in range(47):
            unit = CqUnit(commit_log_offset=n * 100, size=100, tags_code=n)
            assert asyncio.run(q.put(unit, n, alloc))
    q.flush()
    q.close()
    again = ConsumeQueue(tmp_path, "T", 0, 400)
    again.recover()
    assert (again.max_offset, again.max_physic_offset) == (47, 4700)
    again.truncate_by_commit_log(3000)
    assert again.max_offset == 30
    again.close()
    third = ConsumeQueue(tmp_path, "T", 0, 400)
    third.recover()
    assert (third.max_offset, third.max_physic_offset) == (30, 3000)
    last = third.mfq.files[-1]
    assert last.read(0, 10 * UNIT_SIZE) != bytes(10 * UNIT_SIZE)
    assert last.read(10 * UNIT_SIZE, 10 * UNIT_SIZE) == bytes(10 * UNIT_SIZE)
    third.close()


async def test_slave_checkpoint_learns_store_timestamps(tmp_path: Path) -> None:
    """1. A master store puts 20 messages. 2. A slave store receives the master's bytes with
    append_replicated and flushes.
    Expected: the slave's flushed store timestamp (its checkpoint's physicMsgTimestamp) is the
    last replicated record's store timestamp, not 0."""
    async with asyncio.timeout(30):
        master = MessageStore(_config(tmp_path / "m"))
        slave = MessageStore(_config(tmp_path / "s", flushCommitLogLeastPages=0))
        await master.start()
        await slave.start()
        try:
            await _fill(master, 20)
            last = master.commit_log.last_store_timestamp
            offset = 0
            while (data := master.read_raw(offset, 1 << 20)) is not None:
                await slave.append_replicated(offset, data)
                offset += len(data)
            top = slave.commit_log.max_offset
            await wait_until(lambda: slave.reput.reput_from >= top, 5)
            await wait_until(lambda: slave.commit_log.flushed_store_timestamp == last, 5)
        finally:
            await slave.stop()
            await master.stop()


async def test_store_lock_refuses_a_second_process(tmp_path: Path) -> None:
    """1. This process starts a store. 2. Another process starts one on the same directory.
    Expected: the second fails with StoreError naming the lock file."""
    store = MessageStore(_config(tmp_path))
    await store.start()
    try:
        code = (
            "import asyncio, sys\n"
            "from rocketpy.store.config import MessageStoreConfig\n"
            "from rocketpy.store.message_store import MessageStore\n"
            "from rocketpy.common.errors import StoreError\n"
            f"cfg = MessageStoreConfig.build({{'storePathRootDir': {str(tmp_path)!r}}})\n"
            "try:\n    asyncio.run(MessageStore(cfg).start())\n"
            "except StoreError as e:\n    print(e); sys.exit(3)\n"
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
        assert proc.returncode == 3, err.decode()
        assert "Lock failed, MQ already started" in out.decode()
        assert str(tmp_path / "lock") in out.decode()
    finally:
        await store.stop()


async def _torn_after_crash(cfg: MessageStoreConfig) -> tuple[int, int, int]:
    """A store of 110 messages with properties, stopped; then what a kill of this boot leaves
    of a replica: the last 10 records undispatched (their units forgotten), a same-boot
    ``abort``, and the last record torn after its body (its last 12 bytes zero). Returns
    (first undispatched record, last record, written end)."""
    store = MessageStore(cfg)
    await store.start()
    offsets = []
    for i in range(110):
        msg = _msg(i, i % 2)
        msg.properties = f"UNIQ_KEY\x01UNIQ{i:028d}\x02WAIT\x01true\x02"
        r = await store.put_message(msg)
        assert r.status is PutMessageStatus.PUT_OK
        offsets.append(r.wrote_offset)
    written_end = store.commit_log.max_offset
    await wait_until(lambda: store.reput.reput_from >= written_end, 5)
    await store.stop()
    tail_start = await _drop_last_units(cfg, 10)
    cfg.abort_path.write_text(f"{os.getpid()}\nbootId={current_boot_id()}\n")
    last = offsets[-1]
    base = last - last % SEGMENT
    seg = cfg.commit_log_dir / f"{base:020d}"
    data = bytearray(seg.read_bytes())
    data[written_end - base - 12 : written_end - base] = bytes(12)
    seg.write_bytes(bytes(data))
    return tail_start, last, written_end


async def test_replica_recovery_cuts_the_last_record_a_tear_left_whole_looking(
    tmp_path: Path,
) -> None:
    """A classic slave writes the master's bytes as frames arrive, cut anywhere; a kill
    between two frames leaves the last record torn, and a tear after its body (in the
    properties, which no CRC covers) passes every check (a classic chaos run found a slave
    whose copy of a record had zeros past ``UNIQ000``). 1. Put 110 messages with properties,
    stop; forget the last 10 records' units (undispatched), write a same-boot ``abort`` and
    zero the last 12 bytes of the last record. 2. Start as a replica.
    Expected: the walk passes the 10 records, and the last is cut (the master sends it again):
    the log ends at its start, the queues hold 55 and 54, and a clean restart keeps that."""
    async with asyncio.timeout(30):
        cfg = _config(tmp_path)
        tail_start, last, _ = await _torn_after_crash(cfg)

        replica = MessageStore(cfg, replica=True)
        await replica.start()
        try:
            rec = replica.recovery
            assert rec is not None
            assert (rec.start_from, rec.walk_start, rec.process_offset) == (
                "dispatched", tail_start, last,
            )  # fmt: skip
            assert replica.commit_log.max_offset == last
            assert replica.max_offset_in_queue("Recover", 0) == 55
            assert replica.max_offset_in_queue("Recover", 1) == 54
        finally:
            await replica.stop()
        again = MessageStore(cfg, replica=True)
        await again.start()
        try:
            assert again.commit_log.max_offset == last
            assert again.recovery is not None
            assert again.recovery.scanned_bytes == 0
        finally:
            await again.stop()


@pytest.mark.parametrize("keep", [False, True], ids=["slave-cuts", "master-keeps"])
async def test_controller_store_holds_the_last_walked_record_until_its_role_is_known(
    tmp_path: Path, keep: bool
) -> None:
    """Controller mode: a broker restarted after an unclean stop does not know yet whether it
    will be master (its log is the history) or slave (its last record may be a torn replica
    tail). 1. As in the replica test: 110 messages, the last 10 undispatched, the last record
    torn after its body, a same-boot ``abort``. 2. Start with ``hold_tail``. 3. Settle the
    tail as a slave (cut) or as a master (keep).
    Expected: after 2 the log keeps the record but dispatch stops before it (queues 55 and
    54); after 3 a slave's log ends at the record's start, a master's queues reach 55 and 55."""
    async with asyncio.timeout(30):
        cfg = _config(tmp_path)
        _, last, written_end = await _torn_after_crash(cfg)

        held = MessageStore(cfg, hold_tail=True)
        await held.start()
        try:
            assert held.commit_log.max_offset == written_end
            await asyncio.sleep(0.2)  # the reput had its chance to go past the held record
            assert held.dispatched_offset == last
            assert held.max_offset_in_queue("Recover", 1) == 54
            await held.settle_tail(keep=keep)
            if keep:
                await wait_until(lambda: held.dispatched_offset == written_end, 5)
                assert held.max_offset_in_queue("Recover", 1) == 55
            else:
                assert held.commit_log.max_offset == last
                assert held.max_offset_in_queue("Recover", 1) == 54
            assert held.max_offset_in_queue("Recover", 0) == 55
            await held.settle_tail(keep=not keep)  # settled once: nothing more happens
            assert held.commit_log.max_offset == (written_end if keep else last)
        finally:
            await held.stop()
