"""AutoSwitch HA on loopback: role setters, epochs, truncation, SyncStateSet (ha.md section 3)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.ha.autoswitch.service import AutoSwitchHAService
from rocketpy.ha.config import HAConfig
from rocketpy.ha.protocol import (
    HAConnectionState,
    Handshake,
    HandshakeResponse,
    MasterMessageReader,
    TransferFrame,
    encode_handshake,
    encode_handshake_response,
    encode_transfer_frame,
    encode_transfer_report,
)
from rocketpy.ha.state import ReplicaStatus
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.epoch_cache import EpochFileCache
from rocketpy.store.epoch_entries import EpochEntry
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration

FILE_SIZE = 64 * 1024
HA = HAConfig.build({
    "haSendHeartbeatInterval": 100, "haHousekeepingInterval": 3000,
    "haTransferBatchSize": 4096, "haReconnectInterval": 50, "allAckInSyncStateSet": True,
})  # fmt: skip


@dataclass
class Node:
    store: MessageStore
    epochs: EpochFileCache
    ha: AutoSwitchHAService
    proposed: list[frozenset[int]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ha.port}"


@asynccontextmanager
async def _node(root: Path, broker_id: int, config: HAConfig = HA) -> AsyncIterator[Node]:
    store = MessageStore(MessageStoreConfig.build({
        "storePathRootDir": str(root), "mappedFileSizeCommitLog": FILE_SIZE,
        "mappedFileSizeConsumeQueue": 20 * 1000, "flushIntervalCommitLog": 50,
    }))  # fmt: skip
    await store.start()
    epochs = await EpochFileCache.open(root / "epochFileCheckpoint")
    proposed: list[frozenset[int]] = []
    ha = AutoSwitchHAService(store, epochs, config, local_broker_id=broker_id,
                             on_sync_state_set_changed=proposed.append)  # fmt: skip
    await ha.start("127.0.0.1", 0)
    try:
        yield Node(store, epochs, ha, proposed)
    finally:
        await ha.stop()
        await store.stop()


async def _put(store: MessageStore, first: int, count: int) -> int:
    end = 0
    for i in range(first, first + count):
        msg = MessageToStore(topic="AsTopic", queue_id=i % 2, body=b"as-%05d" % i * 6)
        r = await store.put_message(msg)
        assert r.status is PutMessageStatus.PUT_OK
        end = r.wrote_offset + r.wrote_bytes
    return end


def _bytes(store: MessageStore, start: int, end: int) -> bytes:
    out = bytearray()
    while start + len(out) < end:
        chunk = store.read_raw(start + len(out), end - start - len(out))
        assert chunk is not None
        out += chunk
    return bytes(out)


async def test_autoswitch_replicates_expands_and_acks(tmp_path: Path) -> None:
    """1. Node 1 becomes master of epoch 1; node 2 becomes its slave (broker id 2).
    2. Append 400 messages on the master.
    Expected: the slave is byte-identical with epoch history [1@0]; the master proposes
    SyncStateSet {1, 2}; once the controller's answer is applied, a new message's
    wait_for_ack (allAckInSyncStateSet) returns True and the confirm offset reaches the end."""
    async with _node(tmp_path / "a", 1) as a, _node(tmp_path / "b", 2) as b:
        assert await a.ha.change_to_master(1)
        assert await b.ha.change_to_slave(a.address, 1, 2)
        end = await _put(a.store, 0, 400)
        await wait_until(lambda: b.store.commit_log.max_offset == end, 10)
        assert _bytes(b.store, 0, end) == _bytes(a.store, 0, end)
        assert b.epochs.entries() == a.epochs.entries()
        assert [(e.epoch, e.start_offset) for e in a.epochs.entries()] == [(1, 0)]
        await wait_until(lambda: frozenset({1, 2}) in a.proposed, 5)
        a.ha.set_sync_state_set(frozenset({1, 2}))
        end2 = await _put(a.store, 400, 1)
        async with asyncio.timeout(5):
            assert await a.ha.wait_for_ack(end2, 5)
        await wait_until(lambda: a.ha.confirm_offset() == end2, 5)
        await wait_until(lambda: b.store.max_offset_in_queue("AsTopic", 0) == 200, 5)


async def test_autoswitch_old_master_truncates_and_rejoins(tmp_path: Path) -> None:
    """1. A is master of epoch 1 with 100 messages, B replicates all of them, then B's link is
    cut (B becomes master of epoch 2) while A writes 50 more (a divergent tail).
    2. B writes 30 messages in epoch 2. 3. A becomes B's slave in epoch 2.
    Expected: A truncates to the end of epoch 1 as B knows it, receives epoch 2, and ends
    byte-identical to B with epochs [1@0, 2@end1] and the same consume-queue offsets; after a
    restart of A's store its log still ends at B's end (the cut tail does not come back)."""
    async with _node(tmp_path / "a", 1) as a, _node(tmp_path / "b", 2) as b:
        assert await a.ha.change_to_master(1)
        assert await b.ha.change_to_slave(a.address, 1, 2)
        end1 = await _put(a.store, 0, 100)
        await wait_until(lambda: b.store.commit_log.max_offset == end1, 10)
        assert await b.ha.change_to_master(2)
        await _put(a.store, 100, 50)  # A still thinks it is master: divergent
        end2 = await _put(b.store, 1000, 30)
        assert a.store.commit_log.max_offset > end1
        assert await a.ha.change_to_slave(b.address, 2, 1)
        await wait_until(lambda: a.store.commit_log.max_offset == end2, 10)
        assert _bytes(a.store, 0, end2) == _bytes(b.store, 0, end2)
        pairs = [(e.epoch, e.start_offset) for e in a.epochs.entries()]
        assert pairs == [(1, 0), (2, end1)]
        await wait_until(lambda: a.store.reput.reput_from == b.store.reput.reput_from == end2, 5)
        for q in (0, 1):
            assert a.store.max_offset_in_queue("AsTopic", q) == b.store.max_offset_in_queue(
                "AsTopic", q
            )
    # 4. Restart A's store: the divergent records beyond end2 must not come back.
    reopened = MessageStore(a.store.config)
    await reopened.start()
    try:
        assert reopened.commit_log.max_offset == end2
    finally:
        await reopened.stop()


async def test_autoswitch_no_consistent_point_refuses(tmp_path: Path) -> None:
    """1. Node B holds data of epoch 5 only; node A is master of epoch 6 with other data.
    2. B becomes A's slave.
    Expected: the handshake finds no shared (epoch, start) pair: B refuses (counted), keeps its
    log and epoch file untouched, and never reaches TRANSFER."""
    async with _node(tmp_path / "a", 1) as a, _node(tmp_path / "b", 2) as b:
        assert await b.ha.change_to_master(5)
        b_end = await _put(b.store, 0, 10)
        assert await a.ha.change_to_master(6)
        await _put(a.store, 0, 20)
        assert await b.ha.change_to_slave(a.address, 6, 2)
        client = b.ha.client
        assert client is not None
        await wait_until(lambda: client.refusals >= 1, 5)
        assert client.state is not HAConnectionState.TRANSFER
        assert b.store.commit_log.max_offset == b_end
        assert b.epochs.entries() == (EpochEntry(epoch=5, start_offset=0),)


async def test_autoswitch_stale_epoch_role_change_refused(tmp_path: Path) -> None:
    """1. A node becomes master of epoch 3. 2. Ask it to become master of 2 and slave of 2.
    Expected: both refused; its epoch history is still [3@0]."""
    async with _node(tmp_path / "a", 1) as a:
        assert await a.ha.change_to_master(3)
        assert not await a.ha.change_to_master(2)
        assert not await a.ha.change_to_slave("127.0.0.1:1", 2, 1)
        assert [(e.epoch, e.start_offset) for e in a.epochs.entries()] == [(3, 0)]


async def test_autoswitch_slave_drops_transfer_before_handshake(tmp_path: Path) -> None:
    """1. A scripted master accepts the slave and answers its HANDSHAKE with a TRANSFER frame.
    Expected: the slave drops that connection ("State not matched") and reconnects; nothing is
    appended."""
    conns: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    server = await asyncio.start_server(lambda r, w: conns.put_nowait((r, w)), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with _node(tmp_path / "b", 2) as b, asyncio.timeout(10):
            assert await b.ha.change_to_slave(f"127.0.0.1:{port}", 1, 2)
            r1, w1 = await conns.get()
            assert len(await r1.readexactly(16)) == 16  # the 5.1.1 handshake
            frame = TransferFrame(offset=0, epoch=1, epoch_start_offset=0, confirm_offset=0,
                                  body=b"z" * 32)  # fmt: skip
            w1.write(encode_transfer_frame(frame))
            assert await r1.read() == b""
            r2, w2 = await conns.get()
            assert len(await r2.readexactly(16)) == 16
            assert b.store.commit_log.max_offset == 0
            w1.close()
            w2.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_autoswitch_send_path_all_ack_and_min_in_sync(tmp_path: Path) -> None:
    """1. Master 1 with slave 2 in its SyncStateSet {1, 2} (allAckInSyncStateSet,
    minInSyncReplicas=2, slaveTimeout=300 ms); append and handle_ha.
    2. Stop the slave: the master proposes {1} but, until the controller answers, the union
    {1, 2} stays effective. 3. Apply the controller's {1}.
    Expected: PUT_OK with the slave; FLUSH_SLAVE_TIMEOUT while synchronizing; after {1} the
    master refuses new sends up front (can_accept False: IN_SYNC_REPLICAS_NOT_ENOUGH).
    waits_for_replicas (the broker's no-await send path) is False alone, True with {1, 2}."""
    ha = HA.with_updates({"minInSyncReplicas": 2, "slaveTimeout": 300})
    async with _node(tmp_path / "a", 1, ha) as a:
        assert await a.ha.change_to_master(1)
        assert not a.ha.waits_for_replicas(wait_store=True)
        async with _node(tmp_path / "b", 2, ha) as b:
            assert await b.ha.change_to_slave(a.address, 1, 2)
            await wait_until(lambda: frozenset({1, 2}) in a.proposed, 5)
            a.ha.set_sync_state_set(frozenset({1, 2}))
            assert a.ha.can_accept()
            assert a.ha.waits_for_replicas(wait_store=True)
            assert not a.ha.waits_for_replicas(wait_store=False)
            end = await _put(a.store, 0, 1)
            assert await a.ha.handle_ha(end, wait_store=True) is ReplicaStatus.PUT_OK
        await wait_until(lambda: frozenset({1}) in a.proposed, 5)
        assert a.ha.sync_state_set() == frozenset({1, 2})
        end = await _put(a.store, 1, 1)
        status = await a.ha.handle_ha(end, wait_store=True)
        assert status is ReplicaStatus.FLUSH_SLAVE_TIMEOUT
        a.ha.set_sync_state_set(frozenset({1}))
        assert not a.ha.can_accept()


async def test_autoswitch_master_stepping_down_answers_waiting_sends(tmp_path: Path) -> None:
    """1. Master 1 with slave 2 in its SyncStateSet {1, 2} (allAckInSyncStateSet,
    slaveTimeout=10 s). 2. Stop the slave; append a message and wait for its acks.
    3. While it waits, node 1 becomes a slave (epoch 2).
    Expected: the waiting send is answered FLUSH_SLAVE_TIMEOUT at once (not PUT_OK, not after
    10 s), and so is one that reaches handle_ha after the change: neither is on the new
    master for sure."""
    ha = HA.with_updates({"slaveTimeout": 10_000})
    async with _node(tmp_path / "a", 1, ha) as a:
        assert await a.ha.change_to_master(1)
        async with _node(tmp_path / "b", 2, ha) as b:
            assert await b.ha.change_to_slave(a.address, 1, 2)
            await wait_until(lambda: frozenset({1, 2}) in a.proposed, 5)
            a.ha.set_sync_state_set(frozenset({1, 2}))
        end = await _put(a.store, 0, 1)
        waiting = asyncio.create_task(a.ha.handle_ha(end, wait_store=True))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        assert await a.ha.change_to_slave(None, 2, 1)
        async with asyncio.timeout(2):
            assert await waiting is ReplicaStatus.FLUSH_SLAVE_TIMEOUT
        assert await a.ha.handle_ha(end, wait_store=True) is ReplicaStatus.FLUSH_SLAVE_TIMEOUT


async def test_h06_master_epochs_without_writes_keep_newest(tmp_path: Path) -> None:
    """1. Node A becomes master of epoch 1 and writes nothing; it is re-elected (epoch 2), still
    without writes. 2. It writes 10 messages, is re-elected (epoch 3) and writes nothing more.
    Expected: after step 1 the history is [2@0] (the empty epoch 1 is replaced, epoch 2 is not
    dropped); after step 2 it is [2@0, 3@end]: every epoch that owns data or is the newest is
    recorded and the start offsets strictly increase."""
    async with _node(tmp_path / "a", 1) as a:
        assert await a.ha.change_to_master(1)
        assert await a.ha.change_to_master_when_last_role_is_master(2)
        assert [(e.epoch, e.start_offset) for e in a.epochs.entries()] == [(2, 0)]
        end = await _put(a.store, 0, 10)
        assert await a.ha.change_to_master_when_last_role_is_master(3)
        assert [(e.epoch, e.start_offset) for e in a.epochs.entries()] == [(2, 0), (3, end)]


async def test_h06_master_restarted_in_same_epoch_keeps_its_start(tmp_path: Path) -> None:
    """1. Node A is master of epoch 1 with 20 messages; its HA service is rebuilt (a broker
    restart) and the controller names it master of epoch 1 again (registration answer).
    2. An empty node B becomes its slave in epoch 1.
    Expected: A's history is still [1@0] (re-recording epoch 1 at the current max offset would
    leave [0, end) in no epoch, and an empty slave would get only heartbeats, "cannot find
    epoch"); B receives the whole log with history [1@0]."""
    async with _node(tmp_path / "a", 1) as a:
        assert await a.ha.change_to_master(1)
        end = await _put(a.store, 0, 20)
        await a.ha.stop()
        a.ha = AutoSwitchHAService(a.store, a.epochs, HA, local_broker_id=1)
        await a.ha.start("127.0.0.1", 0)
        try:
            assert await a.ha.change_to_master(1)
            assert [(e.epoch, e.start_offset) for e in a.epochs.entries()] == [(1, 0)]
            async with _node(tmp_path / "b", 2) as b:
                assert await b.ha.change_to_slave(a.address, 1, 2)
                await wait_until(lambda: b.store.commit_log.max_offset == end, 10)
                assert [(e.epoch, e.start_offset) for e in b.epochs.entries()] == [(1, 0)]
        finally:
            await a.ha.stop()


_HANDSHAKE_3 = encode_handshake(
    Handshake(is_sync_from_last_file=False, is_async_learner=False, slave_broker_id=3)
)
_BAD_SLAVE_STREAMS = {
    "unknown state": struct.pack(">iq", 3, 0),
    "report before handshake": encode_transfer_report(0),
    "ack beyond master max": _HANDSHAKE_3 + encode_transfer_report(10**9),
    "short frame then EOF": _HANDSHAKE_3[:10],
}


@pytest.mark.parametrize("stream", _BAD_SLAVE_STREAMS.values(), ids=_BAD_SLAVE_STREAMS.keys())
async def test_autoswitch_master_drops_only_the_bad_slave(tmp_path: Path, stream: bytes) -> None:
    """1. Master A (epoch 1, allAck) replicates to slave B, SyncStateSet {1, 2}.
    2. A scripted peer connects to A's HA port and sends ``stream`` (then half-closes).
    3. A appends 50 more messages.
    Expected: A closes the scripted connection (the peer reads EOF) without counting it: its
    SyncStateSet and proposals never name broker 3; B stays connected, receives the new
    messages, and A's confirm offset and a waiting send reach the new end."""
    async with _node(tmp_path / "a", 1) as a, _node(tmp_path / "b", 2) as b:
        assert await a.ha.change_to_master(1)
        assert await b.ha.change_to_slave(a.address, 1, 2)
        await wait_until(lambda: frozenset({1, 2}) in a.proposed, 5)
        a.ha.set_sync_state_set(frozenset({1, 2}))
        reader, writer = await asyncio.open_connection("127.0.0.1", a.ha.port)
        try:
            writer.write(stream)
            writer.write_eof()
            async with asyncio.timeout(5):
                # A handshake is answered first; the connection must still end.
                while await reader.read(4096):
                    pass
        finally:
            writer.close()
        end = await _put(a.store, 0, 50)
        async with asyncio.timeout(5):
            assert await a.ha.wait_for_ack(end, 5)
        await wait_until(lambda: b.store.commit_log.max_offset == end, 5)
        await wait_until(lambda: a.ha.confirm_offset() == end, 5)
        assert [c.slave_id for c in a.ha.master.connections] == [2]
        assert all(3 not in p for p in a.proposed)
        assert a.ha.sync_state_set() == frozenset({1, 2})


async def test_autoswitch_slave_drops_frame_of_older_epoch(tmp_path: Path) -> None:
    """1. Slave B holds epoch 5 data (it was master of 5). 2. A scripted master answers B's
    handshake with history [5@0] and B's max offset, then sends a TRANSFER frame of epoch 4 at
    that offset.
    Expected: B drops the connection and reconnects; the frame's bytes are not appended and
    B's epoch history is still [5@0]."""
    conns: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    server = await asyncio.start_server(lambda r, w: conns.put_nowait((r, w)), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with _node(tmp_path / "b", 2) as b, asyncio.timeout(10):
            assert await b.ha.change_to_master(5)
            b_end = await _put(b.store, 0, 5)
            assert await b.ha.change_to_slave(f"127.0.0.1:{port}", 6, 2)
            r1, w1 = await conns.get()
            assert len(await r1.readexactly(16)) == 16
            w1.write(encode_handshake_response(HandshakeResponse(
                master_max_offset=b_end, last_epoch=5,
                entries=(EpochEntry(epoch=5, start_offset=0),),
            )))  # fmt: skip
            assert await r1.readexactly(12) == encode_transfer_report(b_end)
            frame = TransferFrame(offset=b_end, epoch=4, epoch_start_offset=b_end,
                                  confirm_offset=0, body=b"z" * 32)  # fmt: skip
            w1.write(encode_transfer_frame(frame))
            assert await r1.read() == b""
            r2, w2 = await conns.get()
            assert len(await r2.readexactly(16)) == 16
            assert b.store.commit_log.max_offset == b_end
            assert b.epochs.entries() == (EpochEntry(epoch=5, start_offset=0),)
            w1.close()
            w2.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_h07_transfer_frames_never_span_two_epochs(tmp_path: Path) -> None:
    """H-07. 1. A is master of epoch 1 and writes 40 messages, becomes master of epoch 2 and
    writes 40 more (batch size 4096 B, so an epoch boundary falls inside a batch's reach).
    2. A scripted empty slave handshakes, reads every TRANSFER frame to A's end, acking each.
    3. A real slave B replicates the same log.
    Expected: each data frame lies inside one epoch (its epoch and start are those of the entry
    holding its offset, and it ends at or before that epoch's end); the frames cover the log
    without gaps; B's epoch history equals A's ([1@0, 2@end1])."""
    async with _node(tmp_path / "a", 1) as a, asyncio.timeout(20):
        assert await a.ha.change_to_master(1)
        end1 = await _put(a.store, 0, 40)
        assert await a.ha.change_to_master(2)
        end2 = await _put(a.store, 40, 40)
        entries = a.epochs.entries()
        assert [(e.epoch, e.start_offset) for e in entries] == [(1, 0), (2, end1)]
        reader, writer = await asyncio.open_connection("127.0.0.1", a.ha.port)
        try:
            writer.write(_HANDSHAKE_3)
            writer.write(encode_transfer_report(0))
            messages = MasterMessageReader()
            covered = 0
            while covered < end2:
                for msg in messages.feed(await reader.read(65536)):
                    if not isinstance(msg, TransferFrame) or not msg.body:
                        continue
                    assert msg.offset == covered
                    holder = (1, 0) if msg.offset < end1 else (2, end1)
                    assert (msg.epoch, msg.epoch_start_offset) == holder
                    limit = end1 if msg.epoch == 1 else end2
                    assert msg.offset + len(msg.body) <= limit
                    covered += len(msg.body)
                    writer.write(encode_transfer_report(covered))
        finally:
            writer.close()
        async with _node(tmp_path / "b", 2) as b:
            assert await b.ha.change_to_slave(a.address, 2, 2)
            await wait_until(lambda: b.store.commit_log.max_offset == end2, 10)
            assert b.epochs.entries() == a.epochs.entries()
