"""RaftNode groups on loopback: election, replication, failover, restart, snapshots, minority.

Three in-process members, each with its own RemotingServer on 127.0.0.1 port 0 and its own
store directory under tmp_path; 100 ms heartbeats and a 300 ms election timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.errors import RequestTimeout
from rocketpy.dledger.core import NotLeader, Role
from rocketpy.dledger.log import WAL_DIR
from rocketpy.tools.dledger_group import LocalGroup, Member

pytestmark = pytest.mark.integration

ELECTION_TIMEOUT_S = 0.3


@pytest.fixture
async def group(tmp_path: Path) -> AsyncIterator[LocalGroup]:
    g = LocalGroup(tmp_path, seed=7)
    await g.start()
    try:
        yield g
    finally:
        async with asyncio.timeout(10):
            await g.close()


@pytest.fixture
async def snapshot_group(tmp_path: Path) -> AsyncIterator[LocalGroup]:
    g = LocalGroup(tmp_path, seed=11, snapshot_threshold=50, log_segment_bytes=2048)
    await g.start()
    try:
        yield g
    finally:
        async with asyncio.timeout(10):
            await g.close()


async def propose_many(
    leader: Member, payloads: list[bytes], concurrency: int = 32
) -> list[object]:
    sem = asyncio.Semaphore(concurrency)

    async def one(data: bytes) -> object:
        async with sem:
            return await leader.running.propose(data)

    async with asyncio.timeout(20):
        return list(await asyncio.gather(*(one(p) for p in payloads)))


def followers(group: LocalGroup, leader: Member) -> list[Member]:
    return [m for m in group.running() if m.node_id != leader.node_id]


async def wait_same(group: LocalGroup, count: int, timeout_s: float = 10.0) -> None:
    def same() -> bool:
        states = [m.sm.applied for m in group.running()]
        return all(len(s) == count for s in states) and all(s == states[0] for s in states)

    await wait_until(same, timeout_s)


async def test_dledger_node_elects_one_leader_and_replicates_1000_entries(
    group: LocalGroup,
) -> None:
    """1. Start three members; wait for an agreed leader.
    2. Propose 1000 entries on the leader, 32 at a time.
    Expect: exactly one leader, the others followers naming it; every propose returns its own
    index; all three state machines applied the same 1000 payloads in proposal order per index.
    """
    leader = await group.wait_leader()
    roles = sorted(m.running.status().role.value for m in group.running())
    assert roles == ["follower", "follower", "leader"]
    payloads = [b"entry-%d" % i for i in range(1000)]
    results = await propose_many(leader, payloads)
    assert len(set(results)) == 1000
    await wait_same(group, 1000)
    assert sorted(leader.sm.payloads()) == sorted(payloads)
    applied = dict((d, i) for i, d in leader.sm.applied)
    assert [applied[p] for p in payloads] == results


async def test_dledger_node_follower_propose_raises_not_leader_with_leader_id(
    group: LocalGroup,
) -> None:
    """1. Wait for a leader. 2. Propose on a follower.
    Expect: NotLeader whose leader_id is the leader's id; nothing applied anywhere.
    """
    leader = await group.wait_leader()
    follower = followers(group, leader)[0]
    with pytest.raises(NotLeader) as info:
        await follower.running.propose(b"nope")
    assert info.value.leader_id == leader.node_id
    assert follower.running.leader_address == group.peers[leader.node_id]
    assert all(m.sm.applied == [] for m in group.running())


async def test_dledger_node_leader_stop_elects_new_leader_keeping_committed(
    group: LocalGroup,
) -> None:
    """1. Commit 100 entries. 2. Stop the leader.
    Expect: the two others agree on a new leader within 2x the election timeout; it holds all
    100 committed entries and commits new ones.
    """
    leader = await group.wait_leader()
    await propose_many(leader, [b"a%d" % i for i in range(100)])
    started = time.monotonic()
    await group.stop_member(leader.node_id)
    new = await group.wait_leader(timeout_s=5.0, exclude=leader.node_id)
    elapsed = time.monotonic() - started
    assert elapsed < 2 * ELECTION_TIMEOUT_S, f"failover took {elapsed:.3f}s"
    assert new.node_id != leader.node_id
    await new.running.propose(b"after-failover")
    await wait_same(group, 101)
    assert new.sm.payloads()[:100] == leader.sm.payloads()[:100]


async def test_dledger_node_restarted_follower_catches_up(group: LocalGroup) -> None:
    """1. Commit 50 entries. 2. Stop a follower. 3. Commit 200 more.
    4. Restart it on the same store directory with an empty state machine.
    Expect: it replays its own log, then catches up: all three hold the same 250 entries.
    """
    leader = await group.wait_leader()
    await propose_many(leader, [b"b%d" % i for i in range(50)])
    lagging = followers(group, leader)[0]
    await wait_until(lambda: len(lagging.sm.applied) == 50, 5)
    await group.stop_member(lagging.node_id)
    await propose_many(leader, [b"c%d" % i for i in range(200)])
    node = await group.restart_member(lagging.node_id)
    assert node.status().applied_index >= 1  # the committed prefix was replayed at start
    await wait_same(group, 250)


async def test_dledger_node_restarted_follower_catches_up_from_snapshot(
    snapshot_group: LocalGroup,
) -> None:
    """1. Snapshot threshold 50, 2 KiB segments. Commit 20 entries; stop a follower.
    2. Commit 300 more: the leader snapshots and compacts its log past the follower's end.
    3. Restart the follower.
    Expect: the leader's log starts after a snapshot; the follower is brought up by an
    install-snapshot plus entries and ends with the same 320 entries as the others.
    """
    group = snapshot_group
    leader = await group.wait_leader()
    await propose_many(leader, [b"s%d" % i for i in range(20)])
    lagging = followers(group, leader)[0]
    await wait_until(lambda: len(lagging.sm.applied) == 20, 5)
    await group.stop_member(lagging.node_id)
    await propose_many(leader, [b"t%d" % i for i in range(300)])
    await wait_until(lambda: leader.running.status().applied_index > 300, 5)
    node = leader.running
    assert node.first_index > 100, "the leader compacted its log"
    restarted = await group.restart_member(lagging.node_id)
    await wait_same(group, 320)
    assert restarted.snapshot_index > 20, "the follower installed the leader's snapshot"


async def test_dledger_node_minority_cannot_commit(group: LocalGroup) -> None:
    """1. Commit 10 entries. 2. Stop both followers. 3. Propose on the old leader.
    Expect: RequestTimeout or NotLeader; the entry is applied nowhere; the old leader steps
    down once it sees no quorum.
    """
    leader = await group.wait_leader()
    await propose_many(leader, [b"m%d" % i for i in range(10)])
    for f in followers(group, leader):
        await group.stop_member(f.node_id)
    with pytest.raises((RequestTimeout, NotLeader)):
        await leader.running.propose(b"lost", timeout_s=0.5)
    assert b"lost" not in leader.sm.payloads()
    await wait_until(lambda: leader.running.status().role is not Role.LEADER, 3)
    with pytest.raises(NotLeader):
        await leader.running.propose(b"refused")
    assert len(leader.sm.applied) == 10


async def test_dledger_node_torn_tail_cut_on_restart(group: LocalGroup) -> None:
    """1. Commit 30 entries; stop a follower. 2. Append half a record to its last segment.
    3. Restart it.
    Expect: recovery cuts exactly the appended bytes (offset = old file size, a copy kept);
    the member rejoins and holds the same 30 + 5 entries as the others.
    """
    leader = await group.wait_leader()
    await propose_many(leader, [b"x%d" % i for i in range(30)])
    victim = followers(group, leader)[0]
    await wait_until(lambda: len(victim.sm.applied) == 30, 5)
    await group.stop_member(victim.node_id)
    segment = sorted((victim.store_path / WAL_DIR).iterdir())[-1]
    size = segment.stat().st_size
    garbage = b"\x00\x00\x00\x40\xde\xad\xbe\xefpartial"  # length 64, then 7 of 64 bytes
    with segment.open("ab") as f:
        f.write(garbage)
    await group.restart_member(victim.node_id)
    report = group.recovery(victim.node_id)
    assert report is not None
    assert report.torn_segment == segment.name
    assert report.torn_offset == size
    assert report.torn_bytes == len(garbage)
    assert segment.stat().st_size == size
    await propose_many(leader, [b"y%d" % i for i in range(5)])
    await wait_same(group, 35)


async def test_dledger_node_transfer_leadership_and_role_listeners(group: LocalGroup) -> None:
    """1. Wait for a leader; record role-listener calls on every member.
    2. Commit 5 entries; transfer leadership to a follower.
    Expect: the target leads; the old leader's listener got False, the target's got True
    (after its NOOP was applied); writes go through the new leader.
    """
    leader = await group.wait_leader()
    calls: dict[str, list[bool]] = {m.node_id: [] for m in group.running()}
    for m in group.running():
        m.running.add_role_listener(calls[m.node_id].append)
    await propose_many(leader, [b"p%d" % i for i in range(5)])
    assert calls[leader.node_id] in ([], [True])  # announced before or after registration
    for seen in calls.values():
        seen.clear()
    target = followers(group, leader)[0]
    await leader.running.transfer_leadership(target.node_id, timeout_s=3.0)
    await wait_until(lambda: target.running.is_leader and calls[target.node_id] == [True], 3)
    assert calls[leader.node_id] == [False]
    await target.running.propose(b"via-new-leader")
    await wait_same(group, 6)
