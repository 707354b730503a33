"""Retention in DLedger CommitLog mode across a three-broker group (dledger-commitlog.md
section 1.6; issue 22): ``mqbroker`` processes and a NameServer on loopback.

Data files are ``mappedFileSizeCommitLog=65536`` long (upstream's key for DLedger's
``mappedFileSizeForEntryData``: DLedgerCommitLog copies it; DLedger has no key of its own in a
broker), ``fileReservedTime=0`` (files are kept ``fileReservedTime + 1`` = 1 hour) and
``deleteWhen`` names every hour. The test ages files by setting their mtimes two hours back.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketpy.common.codes import ResponseCode
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.cluster import unique
from tests.helpers.dledger_brokers import (
    NODES,
    DLedgerGroup,
    create_topic,
    running_group,
    wait_roles,
)

pytestmark = [pytest.mark.process, pytest.mark.timeout(150)]

_EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))
_EXTRA = (
    f"mappedFileSizeCommitLog=65536\nfileReservedTime=0\ndeleteWhen={_EVERY_HOUR}\n"
    "slaveReadEnable=true\ncleanResourceInterval=500\nmessageIndexEnable=false\n"
)
_HEADER = struct.Struct(">iiqqq")  # magic, size, index, term, pos


def _data_files(group: DLedgerGroup, node: str) -> list[Path]:
    d = group.tmp / node / f"dledger-{node}" / "data"
    return sorted(p for p in d.iterdir() if p.name.isdigit())


def _first_index(path: Path) -> int:
    with path.open("rb") as f:
        magic, _size, index, _term, pos = _HEADER.unpack(f.read(_HEADER.size))
    assert (magic, pos) == (1, int(path.name))
    return index


def _age_all_but_last(group: DLedgerGroup, node: str) -> None:
    old = time.time() - 7200
    for p in _data_files(group, node)[:-1]:
        os.utime(p, (old, old))


def _body(i: int) -> bytes:
    return f"msg-{i:04d}-".encode() + bytes(4000)


async def _send(addr: str, topic: str, first: int, count: int) -> None:
    client = JavaLikeClient()
    try:
        for i in range(first, first + count):
            resp = await client.send(addr, topic, _body(i), queue_id=0, timeout_s=10)
            assert resp.code == ResponseCode.SUCCESS, (i, resp.code, resp.remark)
    finally:
        await client.close()


async def _pull(addr: str, topic: str, offset: int) -> tuple[int, int, list[bytes]]:
    """(code, minOffset, bodies) of one pull of up to 32 messages of queue 0 at ``offset``."""
    client = JavaLikeClient()
    try:
        resp = await client.pull(
            addr, "retention-reader", topic, offset, queue_id=0, expression="*", suspend_ms=0,
            max_nums=32,
        )  # fmt: skip
    finally:
        await client.close()
    bodies = [m.body for m in decode_records(resp.body)] if resp.body else []
    return resp.code, int(resp.ext("minOffset") or -1), bodies


async def _read_from(addr: str, topic: str, offset: int, end: int) -> list[bytes]:
    out: list[bytes] = []
    while offset < end:
        code, _, bodies = await _pull(addr, topic, offset)
        assert code == ResponseCode.SUCCESS, (offset, code)
        out.extend(bodies)
        offset += len(bodies)
    return out


async def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


async def _min_offset_at_least(addr: str, topic: str, want: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while (await _pull(addr, topic, 0))[1] < want:
        assert time.monotonic() < deadline, f"{addr} minOffset stays below {want}"
        await asyncio.sleep(0.2)


async def _scenario(group: DLedgerGroup, ns: str) -> None:
    leader = await wait_roles(ns, group, 20)
    follower, other = (n for n in NODES if n != leader)
    topic = unique("DLedgerRetention")
    await create_topic(list(group.addrs.values()), topic, 1)
    await _send(group.addrs[leader], topic, 0, 5)
    await _wait(lambda: len(_data_files(group, follower)) >= 1, 10, "follower files")
    assert group.daemons.pop(follower).stop() == 0

    # 1. Several files on the two running nodes; age all but the last: they go on both.
    await _send(group.addrs[leader], topic, 5, 75)
    for node in (leader, other):
        assert len(_data_files(group, node)) >= 4
        _age_all_but_last(group, node)
    for node in (leader, other):
        await _wait(lambda n=node: len(_data_files(group, n)) == 1, 15, f"{node} deletes")
    (first,) = _data_files(group, leader)
    assert [p.name for p in _data_files(group, other)] == [first.name]
    begin = _first_index(first)
    assert begin > 5

    # 2. The leader serves above the new minimum, answers OFFSET_MOVED below it, takes sends.
    await _min_offset_at_least(group.addrs[leader], topic, begin, 10)
    code, min_offset, _ = await _pull(group.addrs[leader], topic, 0)
    assert (code, min_offset) == (ResponseCode.PULL_OFFSET_MOVED, begin)
    await _send(group.addrs[leader], topic, 80, 5)
    want = [_body(i) for i in range(begin, 85)]
    assert await _read_from(group.addrs[leader], topic, begin, 85) == want

    # 3. The leader restarts on its retained files (a new term: its pusher's in-memory copies
    # of this term's entries are gone with it): same first entry, same reads, sends resume.
    assert group.daemons.pop(leader).stop() == 0
    group.start(leader)
    master = await wait_roles(ns, group, 30)
    assert _first_index(_data_files(group, leader)[0]) == begin
    await _send(group.addrs[master], topic, 85, 1)
    want.append(_body(85))
    assert await _read_from(group.addrs[master], topic, begin, 86) == want

    # 4. The stopped follower needs entry 5, gone on the leader: the leader TRUNCATEs it to its
    # first entry; the follower drops its log, restarts at the leader's first file, its reput
    # and queues jump to the new minimum and it serves the same messages (slaveReadEnable).
    group.start(follower)
    assert await wait_roles(ns, group, 30) != follower
    await _wait(
        lambda: [p.name for p in _data_files(group, follower)][:1] == [first.name], 30,
        "follower rebuilt at the leader's first file",
    )  # fmt: skip
    await _min_offset_at_least(group.addrs[follower], topic, begin, 20)
    deadline = time.monotonic() + 20
    while True:
        code, _, bodies = await _pull(group.addrs[follower], topic, begin)
        if code == ResponseCode.SUCCESS and bodies:
            got = await _read_from(group.addrs[follower], topic, begin, 86)
            if got == want:
                break
        assert time.monotonic() < deadline, "follower does not serve the retained messages"
        await asyncio.sleep(0.2)


def test_dledger_group_deletes_expired_files_and_keeps_serving(tmp_path: Path) -> None:
    """1. Start the group (64 KiB data files, kept 1 h, every hour a delete hour); send 5 4-KiB
    messages to queue 0; stop one follower (F). Send 75 more (5+ files per node); age all but
    the last data file on the two running nodes. Expected: both delete them (one file left,
    the same on both); its first entry index ``begin`` > 5.
    2. Pull from the leader at 0. Expected: PULL_OFFSET_MOVED with minOffset = ``begin``;
    5 more sends succeed; messages ``begin``..84 read back in order.
    3. Restart the leader (F still down). Expected: a master again; the restarted node's first
    data file still starts with ``begin``; a send succeeds and reads from ``begin`` give every
    retained message.
    4. Restart F (its next entry, 5, is gone on the leader). Expected: DLedger 0.3.1.2's
    answer -- TRUNCATE to the leader's first entry: F's log restarts at the leader's first file,
    its minOffset reaches ``begin`` and it serves messages ``begin``..85. (Restarted in the
    leader's old term, the leader could instead resend 5.. from its in-memory copies of that
    term's entries, which F would take: step 3 makes the TRUNCATE path certain.)"""
    with running_group(tmp_path, extra=_EXTRA) as (group, ns):
        asyncio.run(asyncio.wait_for(_scenario(group, ns), 130))
