"""A 3-member DLedger 0.3.1.2 group on loopback: election, quorum appends, byte identity,
minority and majority loss, leader failover, divergence truncation, batch push."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.dledger.commitlog_member.member import DLedgerAppendError, DLedgerMember
from rocketpy.dledger.commitlog_member.protocol import DLedgerResponseCode
from rocketpy.dledger.commitlog_member.state import Role
from rocketpy.store.dledger_log.entry import INDEX_UNIT_SIZE
from rocketpy.store.dledger_log.meta import TermState, persist_term_state
from tests.helpers.dledger_member import Group

pytestmark = pytest.mark.integration


def _body(i: int) -> bytes:
    # Not a message record: patching is the log's business, tests use plain bodies.
    return f"message-{i:06d}-".encode() * 3


async def _append_many(leader: DLedgerMember, start: int, count: int) -> list[tuple[int, int]]:
    out = []
    for i in range(start, start + count):
        pending = leader.append_nowait(_body(i), patch=False)
        out.append(pending)
    results = []
    async with asyncio.timeout(10):
        for p in out:
            resp = await p.future
            assert resp.code == DLedgerResponseCode.SUCCESS, resp
            results.append((resp.index, resp.pos))
    return results


def _files(member: DLedgerMember, sub: str) -> bytes:
    d: Path = member.config.base_dir / sub
    return b"".join(p.read_bytes() for p in sorted(d.iterdir()) if p.is_file())


async def _wait_caught_up(group: Group, end: int) -> None:
    await wait_until(
        lambda: all(
            m.store.ledger_end_index == end and m.store.committed_index == end
            for m in group.members.values()
        ),
        10,
    )


def _assert_identical(group: Group) -> None:
    ms = list(group.members.values())
    end = ms[0].store.ledger_end_index
    pos = ms[0].store.write_pos
    for m in ms[1:]:
        assert m.store.ledger_end_index == end
        assert _files(m, "data")[:pos] == _files(ms[0], "data")[:pos]
        assert (
            _files(m, "index")[: (end + 1) * INDEX_UNIT_SIZE]
            == _files(ms[0], "index")[: (end + 1) * INDEX_UNIT_SIZE]
        )


async def test_elects_and_replicates_byte_identically(make_group: Any) -> None:
    g: Group = await make_group()
    leader = await g.wait_leader()
    follower = next(m for m in g.members.values() if m is not leader)
    committed: list[tuple[int, int]] = []
    roles: list[tuple[int, Role]] = []
    follower.add_committed_listener(lambda index, pos: committed.append((index, pos)))
    follower.add_role_change_handler(lambda term, role: roles.append((term, role)))
    terms = {m.term for m in g.members.values()}
    assert len(terms) == 1
    assert await leader.wait_leader_ready(2)
    results = await _append_many(leader, 0, 200)
    assert [r[0] for r in results] == list(range(200))
    index, pos = await leader.append(b"one more", patch=False)
    assert index == 200
    await _wait_caught_up(g, 200)
    for m in g.members.values():
        await asyncio.sleep(0)
        assert m.store.get(200).body == b"one more"
        assert m.store.get(200).pos == pos
    await asyncio.sleep(0.05)  # a flush
    _assert_identical(g)
    stats = leader.statistics()
    assert (stats.role, stats.term, stats.leader_id) == ("LEADER", leader.term, stats.self_id)
    assert (stats.ledger_end_index, stats.committed_index, stats.pending_appends) == (200, 200, 0)
    await wait_until(lambda: set(leader.statistics().water_marks.values()) == {200}, 5)
    fstats = follower.statistics()
    assert (fstats.role, fstats.water_marks, fstats.committed_pos) == (
        "FOLLOWER", {}, stats.committed_pos,
    )  # fmt: skip
    assert fstats.applied_single_pushes >= 1
    # the follower's committed position moved forward to the end of entry 200, never back
    assert committed[-1] == (200, follower.store.committed_pos)
    assert committed == sorted(committed)
    # handlers see every change the follower went through, terms never going back (on a loaded
    # machine a stalled loop may cost a heartbeat and an election)
    assert [t for t, _ in roles] == sorted(t for t, _ in roles)
    if not roles:
        assert follower.role is Role.FOLLOWER
    # currterm and checkpoint exist and agree
    await wait_until(
        lambda: all((m.config.base_dir / "checkpoint").exists() for m in g.members.values()), 5
    )
    for m in g.members.values():
        text = (m.config.base_dir / "currterm").read_text()
        assert f"currTerm={leader.term}" in text


async def test_one_follower_down_still_commits_two_down_times_out(make_group: Any) -> None:
    g: Group = await make_group()
    leader = await g.wait_leader()
    lid = leader.config.self_id
    followers = [i for i in g.members if i != lid]
    await g.stop(followers[0])
    results = await _append_many(leader, 0, 20)
    assert results[-1][0] == 19
    await g.stop(followers[1])
    with pytest.raises(DLedgerAppendError) as exc:
        await leader.append(b"no quorum", timeout_s=5, patch=False)
    assert exc.value.code in (
        DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT,
        DLedgerResponseCode.TERM_CHANGED,
    )
    assert leader.store.committed_index == 19
    # the lone leader steps down (no heartbeat quorum for > 3 intervals)
    await wait_until(lambda: leader.role is not Role.LEADER, 5)
    # a follower back: a leader again and the uncommitted entry is settled by the new term
    await g.start(followers[0])
    new_leader = await g.wait_leader()
    await new_leader.append(b"after", patch=False)
    await _wait_caught_up(g, new_leader.store.ledger_end_index)


async def test_leader_stop_elects_new_leader_and_old_rejoins(make_group: Any) -> None:
    g: Group = await make_group()
    leader = await g.wait_leader()
    await _append_many(leader, 0, 50)
    old = leader.config.self_id
    old_term = leader.term
    await g.stop(old)
    new_leader = await g.wait_leader()
    assert new_leader.config.self_id != old
    assert new_leader.term > old_term
    # section 3.4: the new leader is ready once the previous term's entries are committed
    assert await new_leader.wait_leader_ready(5)
    assert new_leader.store.committed_index == new_leader.store.ledger_end_index == 49
    # entries committed before are still there, new ones commit with 2 of 3
    assert new_leader.store.get(49).body == _body(49)
    await _append_many(new_leader, 50, 10)
    await g.start(old)
    await g.wait_leader()
    await _wait_caught_up(g, 59)
    assert g.members[old].role is Role.FOLLOWER
    await asyncio.sleep(0.05)
    _assert_identical(g)


async def test_a_lagging_member_with_a_higher_term_is_led_again(make_group: Any) -> None:
    """1. A group; 20 entries. 2. Stop a follower, 20 more without it. 3. Raise its persisted
    term far past the leader's (what a pause or a cut past its heartbeat timeout does: it
    stands as a candidate at each attempt) and start it again.
    Expected: it can never win (its ledger is behind, both others refuse it), and it answers
    the leader's heartbeats with its higher term; the leader steps down to that term rather
    than keep leading a quorum without it (upstream 0.3.1.2 keeps leading, and the member
    stays a candidate for good). A leader of a term at least as high leads all three, the
    member catches up, and the logs are byte-identical."""
    g: Group = await make_group()
    leader = await g.wait_leader()
    await _append_many(leader, 0, 20)
    lagging = next(i for i in g.members if i != leader.config.self_id)
    await g.stop(lagging)
    await _append_many(leader, 20, 20)
    high = leader.term + 5
    persist_term_state(g.configs[lagging].base_dir, TermState(curr_term=high))
    await g.start(lagging)
    new_leader = await g.wait_leader(timeout_s=15)
    assert new_leader.config.self_id != lagging
    assert new_leader.term >= high
    await _wait_caught_up(g, 39)
    _assert_identical(g)


async def test_restart_all_recovers_terms_logs_and_commits(make_group: Any) -> None:
    g: Group = await make_group()
    leader = await g.wait_leader()
    await _append_many(leader, 0, 100)
    await _wait_caught_up(g, 99)
    term = leader.term
    for i in list(g.members):
        await g.stop(i)
    for i in g.configs:
        text = (g.configs[i].base_dir / "checkpoint").read_text()
        assert "committedIndex=99" in text
        assert "endIndex=99" in text
    for i in g.configs:
        m = await g.start(i)
        assert m.store.ledger_end_index == 99
        assert m.store.committed_index == 99
        assert m.term >= term
    leader = await g.wait_leader()
    # 0.3.1.2 does not raise the term on start: the member that led term T may lead T again,
    # re-elected by voters whose persisted vote names it
    assert leader.term >= term
    assert await leader.wait_leader_ready(5)
    await _append_many(leader, 100, 10)
    await _wait_caught_up(g, 109)
    await asyncio.sleep(0.05)
    _assert_identical(g)


async def test_shutdown_answers_pending_appends(make_group: Any) -> None:
    g: Group = await make_group()
    leader = await g.wait_leader()
    for i in list(g.members):
        if g.members[i] is not leader:
            await g.stop(i)
    pending = leader.append_nowait(b"never acknowledged", patch=False)
    await g.stop(leader.config.self_id)
    assert pending.future.done()
    assert pending.future.result().code == DLedgerResponseCode.INTERNAL_ERROR


@pytest.mark.parametrize("batch", [False, True], ids=["single-push", "batch-push"])
async def test_restarted_follower_learns_commit_without_new_appends(
    make_group: Any, batch: bool
) -> None:
    """1. Append 20 entries; stop one follower as soon as it holds them all (before a COMMIT
    push raised its committed index to the end). 2. Restart it while the
    leader stays leader of the same term (its dispatcher for that peer is still in APPEND and
    has nothing more to push). Expected: within 5 s, with no further append, the restarted
    follower's committed index reaches the leader's (its first COMMIT push finds nothing
    verified for this leader yet, is answered 406 and sends the leader back to COMPARE)."""
    g: Group = await make_group(enable_batch_push=batch)
    leader = await g.wait_leader()
    assert await leader.wait_leader_ready(2)
    follower_id, follower = next((i, m) for i, m in g.members.items() if m is not leader)
    await _append_many(leader, 0, 20)
    await wait_until(lambda: follower.store.ledger_end_index == 19, 5)
    term = leader.term
    # stopped before a COMMIT push told it the last entry is committed: it restarts with the
    # whole log but a committed index (from its checkpoint) behind the leader's
    await g.stop(follower_id)
    again = await g.start(follower_id)
    assert again.store.ledger_end_index == 19
    await wait_until(lambda: again.store.committed_index == 19, 5)
    assert leader.term == term


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
async def test_follower_back_from_a_restart_gets_its_lost_pushes_at_once(
    make_group: Any, batch: bool
) -> None:
    """1. Append 20 entries, all replicated. 2. Stop a follower and append 400 more (the other
    follower makes the quorum): the leader's pushes to the stopped one die with its connection
    or fail to dial. 3. Restart it while the leader keeps its term (its dispatcher stays in
    APPEND). Expected: within 5 s it holds all 420 entries, byte-identical; the leader sent
    the lost pushes again in one pass over the new connection, and only a few pushes one at a
    time after maxPushTimeOutMs (300 ms here; upstream's one-at-a-time walk made ~400)."""
    g: Group = await make_group(enable_batch_push=batch)
    leader = await g.wait_leader()
    assert await leader.wait_leader_ready(2)
    follower_id = next(i for i, m in g.members.items() if m is not leader)
    await _append_many(leader, 0, 20)
    await _wait_caught_up(g, 19)
    term = leader.term
    await g.stop(follower_id)
    await _append_many(leader, 20, 400)
    again = await g.start(follower_id)
    await wait_until(lambda: again.store.ledger_end_index == 419, 5)
    await _wait_caught_up(g, 419)
    assert leader.term == term
    _assert_identical(g)
    stats = leader.statistics()
    assert stats.lost_pushes_resent > 0, stats
    assert stats.timed_out_pushes_resent <= 20, stats
