"""Classic HA on loopback: a master and slave MessageStore in one process (ha.md section 2)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.ha.classic.master import ClassicHAMaster
from rocketpy.ha.classic.slave import ClassicHAClient
from rocketpy.ha.config import HAConfig
from rocketpy.ha.protocol import (
    ClassicFrameReader,
    encode_classic_frame,
    encode_offset_report,
)
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration

FILE_SIZE = 64 * 1024


def _store(root: Path, file_size: int = FILE_SIZE) -> MessageStore:
    return MessageStore(MessageStoreConfig.build({
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": file_size,
        "mappedFileSizeConsumeQueue": 20 * 1000,
        "flushIntervalCommitLog": 50,
    }))  # fmt: skip


def _ha(**extra: Any) -> HAConfig:
    values: dict[str, Any] = {
        "haSendHeartbeatInterval": 100,
        "haHousekeepingInterval": 3000,
        "haTransferBatchSize": 4096,
        "haReconnectInterval": 50,
    }
    values.update(extra)
    return HAConfig.build(values)


def _msg(i: int) -> MessageToStore:
    return MessageToStore(topic="HaTopic", queue_id=i % 4, body=b"m%06d" % i * 8,
                          properties=f"TAGS\x01t{i % 3}\x02")  # fmt: skip


async def _put(store: MessageStore, first: int, count: int) -> int:
    end = 0
    for i in range(first, first + count):
        r = await store.put_message(_msg(i))
        assert r.status is PutMessageStatus.PUT_OK
        end = r.wrote_offset + r.wrote_bytes
    return end


def _log_bytes(store: MessageStore, start: int, end: int) -> bytes:
    out = bytearray()
    pos = start
    while pos < end:
        chunk = store.read_raw(pos, end - pos)
        assert chunk is not None, pos
        out += chunk
        pos += len(chunk)
    return bytes(out)


@asynccontextmanager
async def _running(store: MessageStore) -> AsyncIterator[MessageStore]:
    await store.start()
    try:
        yield store
    finally:
        await store.stop()


@asynccontextmanager
async def _master(store: MessageStore, config: HAConfig) -> AsyncIterator[ClassicHAMaster]:
    master = ClassicHAMaster(store, config)
    await master.start("127.0.0.1", 0)
    try:
        yield master
    finally:
        await master.stop()


@asynccontextmanager
async def _client(store: MessageStore, address: str) -> AsyncIterator[ClassicHAClient]:
    client = ClassicHAClient(store, _ha(haMasterAddress=address))
    client.start()
    try:
        yield client
    finally:
        await client.stop()


async def test_classic_ha_5000_messages_byte_identical(tmp_path: Path) -> None:
    """1. Start master and empty slave stores; connect the slave.
    2. Append 5,000 messages on the master (many 64 KiB segments, 4 KiB frames).
    Expected: the slave's commit log is byte-identical, its consume queues have the same
    max offsets, and the master saw the slave ack the end."""
    async with (
        _running(_store(tmp_path / "m")) as ms,
        _running(_store(tmp_path / "s")) as ss,
        _master(ms, _ha()) as master,
        _client(ss, f"127.0.0.1:{master.port}"),
    ):
        await wait_until(lambda: len(master.connections) == 1, 5)
        end = await _put(ms, 0, 5000)
        assert end > 8 * FILE_SIZE
        await wait_until(lambda: ss.commit_log.max_offset == ms.commit_log.max_offset, 20)
        assert _log_bytes(ss, 0, end) == _log_bytes(ms, 0, end)
        await wait_until(lambda: master.push_to_slave_max_offset == ms.commit_log.max_offset, 5)
        # Both reputs done: the master's may still wait on a consume-queue segment being
        # created on its allocation executor.
        await wait_until(
            lambda: ms.reput.reput_from == ss.reput.reput_from == ms.commit_log.max_offset, 10
        )
        for q in range(4):
            assert ss.max_offset_in_queue("HaTopic", q) == ms.max_offset_in_queue("HaTopic", q)
            assert ss.max_offset_in_queue("HaTopic", q) == 1250


async def test_classic_ha_slave_restart_resumes(tmp_path: Path) -> None:
    """1. Replicate 300 messages; stop the slave (client and store).
    2. Append 300 more on the master; restart the slave store and client.
    Expected: the master sees request offset = the slave's old max offset (not 0), and the
    slave catches up byte-identical."""
    async with _running(_store(tmp_path / "m")) as ms, _master(ms, _ha()) as master:
        addr = f"127.0.0.1:{master.port}"
        async with _running(_store(tmp_path / "s")) as ss, _client(ss, addr):
            await _put(ms, 0, 300)
            await wait_until(lambda: ss.commit_log.max_offset == ms.commit_log.max_offset, 10)
            first_end = ss.commit_log.max_offset
        await wait_until(lambda: not master.connections, 5)
        end = await _put(ms, 300, 300)
        async with _running(_store(tmp_path / "s")) as ss, _client(ss, addr):
            await wait_until(lambda: len(master.connections) == 1, 5)
            assert master.connections[0].statistics().request_offset == first_end
            await wait_until(lambda: ss.commit_log.max_offset == end, 10)
            assert _log_bytes(ss, 0, end) == _log_bytes(ms, 0, end)
            await wait_until(lambda: ss.max_offset_in_queue("HaTopic", 0) == 150, 5)


async def test_classic_ha_empty_slave_starts_at_master_last_segment(tmp_path: Path) -> None:
    """1. Append 2,000 messages on the master (several segments), then connect an empty slave.
    2. Append 10 more. Expected: the slave's first segment is the master's last one at connect
    time; its bytes from there match, and its queues dispatch the new messages."""
    async with _running(_store(tmp_path / "m")) as ms, _master(ms, _ha()) as master:
        await _put(ms, 0, 2000)
        last_start = ms.commit_log.max_offset - ms.commit_log.max_offset % FILE_SIZE
        assert last_start > 0
        async with _running(_store(tmp_path / "s")) as ss, _client(ss, f"127.0.0.1:{master.port}"):
            await wait_until(lambda: ss.commit_log.max_offset == ms.commit_log.max_offset, 10)
            end = await _put(ms, 2000, 10)
            await wait_until(lambda: ss.commit_log.max_offset == end, 10)
            assert ss.commit_log.min_offset == last_start
            assert _log_bytes(ss, last_start, end) == _log_bytes(ms, last_start, end)
            await wait_until(lambda: ss.reput.reput_from == ms.reput.reput_from == end, 5)
            assert ss.max_offset_in_queue("HaTopic", 0) == ms.max_offset_in_queue("HaTopic", 0)


async def test_classic_ha_wait_for_ack_releases_only_after_ack(tmp_path: Path) -> None:
    """1. A scripted slave connects and requests offset 0.
    2. Append one message; start wait_for_ack(end, needed=2); the slave reads the data frame.
    3. Check the wait is still pending; the slave then reports `end`.
    Expected: the wait returns True only after the report; a wait with nobody acking
    returns False after its timeout."""
    async with _running(_store(tmp_path / "m")) as ms, _master(ms, _ha()) as master:
        assert not await master.wait_for_ack(1, 0.1, 2)
        reader, writer = await asyncio.open_connection("127.0.0.1", master.port)
        try:
            writer.write(encode_offset_report(0))
            await wait_until(lambda: len(master.connections) == 1, 5)
            end = await _put(ms, 0, 1)
            waiting = asyncio.create_task(master.wait_for_ack(end, 5, 2))
            frames = ClassicFrameReader()
            got = b""
            async with asyncio.timeout(5):
                while len(got) < end:
                    for f in frames.feed(await reader.read(65536)):
                        got += f.body
            assert got == _log_bytes(ms, 0, end)
            await asyncio.sleep(0)
            assert not waiting.done()
            writer.write(encode_offset_report(end))
            async with asyncio.timeout(5):
                assert await waiting
            assert master.push_to_slave_max_offset == end
        finally:
            writer.close()


async def test_classic_ha_slave_drops_on_offset_mismatch_and_reconnects(tmp_path: Path) -> None:
    """1. A non-empty slave connects to a scripted master; it reports its max offset M.
    2. The master pushes a frame at M + 100.
    Expected: the slave closes that connection, reconnects, reports M again, and its log is
    unchanged."""
    connections: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
    connections = asyncio.Queue()

    def accept(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        connections.put_nowait((r, w))

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with _running(_store(tmp_path / "s")) as ss:
            own = await _put(ss, 0, 3)
            async with _client(ss, f"127.0.0.1:{port}") as client, asyncio.timeout(10):
                r1, w1 = await connections.get()
                assert await r1.readexactly(8) == encode_offset_report(own)
                w1.write(encode_classic_frame(own + 100, b"x" * 10))
                assert await r1.read() == b""  # the slave closed it
                r2, w2 = await connections.get()
                assert await r2.readexactly(8) == encode_offset_report(own)
                assert ss.commit_log.max_offset == own
                assert client.statistics().connects == 2
                w1.close()
                w2.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_classic_ha_heartbeats_keep_idle_connection(tmp_path: Path) -> None:
    """1. Master and slave with 50 ms heartbeats and a 400 ms housekeeping deadline.
    2. Stay idle for 1.2 s, reading the master's frames on the side is not possible, so watch
    the connection count. Expected: one connection throughout (heartbeats both ways)."""
    ha = _ha(haSendHeartbeatInterval=50, haHousekeepingInterval=400)
    async with (
        _running(_store(tmp_path / "m")) as ms,
        _running(_store(tmp_path / "s")) as ss,
        _master(ms, ha) as master,
    ):
        client = ClassicHAClient(
            ss, ha.with_updates({"haMasterAddress": f"127.0.0.1:{master.port}"})
        )
        client.start()
        try:
            await wait_until(lambda: client.connected, 5)
            await asyncio.sleep(1.2)  # idle period under test, not a wait for a condition
            assert client.statistics().connects == 1
            assert len(master.connections) == 1
        finally:
            await client.stop()


async def test_classic_ha_flow_control_limits_rate(tmp_path: Path) -> None:
    """1. Master with haFlowControlEnable and 8 KiB/s; 20 KiB+ already written.
    2. An empty slave connects (starts at segment 0: one segment).
    Expected: replication completes byte-identical but needs at least two window resets
    (>= 1 s)."""
    ha = _ha(haFlowControlEnable=True, maxHaTransferByteInSecond=8192, haTransferBatchSize=2048)
    async with _running(_store(tmp_path / "m", file_size=1024 * 1024)) as ms:
        end = await _put(ms, 0, 160)
        assert end > 20 * 1024
        async with _master(ms, ha) as master, _running(_store(tmp_path / "s", 1024 * 1024)) as ss:
            began = time.monotonic()
            async with _client(ss, f"127.0.0.1:{master.port}"):
                await wait_until(lambda: ss.commit_log.max_offset == end, 10)
            assert time.monotonic() - began >= 1.0
            assert _log_bytes(ss, 0, end) == _log_bytes(ms, 0, end)
