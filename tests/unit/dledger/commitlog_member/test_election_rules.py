"""DLedger 0.3.1.2's VOTE and HEART_BEAT answers, rule by rule in upstream's order
(dledger-commitlog.md sections 3.1 and 3.2), on a member that is not started (its peer port is
never used here), with ``currterm`` persisted under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig, parse_peers
from rocketpy.dledger.commitlog_member.elector import LeaderElector
from rocketpy.dledger.commitlog_member.protocol import (
    DLedgerResponseCode,
    HeartBeatRequest,
    VoteRequest,
    VoteResult,
)
from rocketpy.dledger.commitlog_member.rpc import PeerRpc
from rocketpy.dledger.commitlog_member.state import MemberState, Role
from rocketpy.store.dledger_log.meta import load_term_state

PEERS = "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"


class Node:
    def __init__(self, tmp: Path, *, term: int = 2, end: tuple[int, int] = (9, 2)) -> None:
        self.config = DLedgerMemberConfig(group="g", self_id="n0", peers=PEERS, store_base_dir=tmp)
        self.config.base_dir.mkdir(parents=True)
        self.state = MemberState(self.config)
        self.state.curr_term = term
        self.end = end
        rpc = PeerRpc(
            self_id="n0", address="127.0.0.1:0", peers=self.config.peer_map, rpc_timeout_ms=100
        )
        self.elector = LeaderElector(self.config, self.state, rpc, lambda: self.end)


def _vote(leader: str = "n1", term: int = 2, end_index: int = 9, end_term: int = 2) -> VoteRequest:
    return VoteRequest(
        group="g", remote_id="n0", local_id=leader, leader_id=leader, term=term,
        ledger_end_index=end_index, ledger_end_term=end_term,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (_vote(leader="n9"), VoteResult.REJECT_UNKNOWN_LEADER),
        (_vote(leader="n0"), VoteResult.REJECT_UNEXPECTED_LEADER),
        # the ledger is checked before the term: a bigger term does not help a shorter log
        (_vote(term=7, end_term=1, end_index=50), VoteResult.REJECT_EXPIRED_LEDGER_TERM),
        (_vote(term=7, end_index=8), VoteResult.REJECT_SMALL_LEDGER_END_INDEX),
        (_vote(term=1), VoteResult.REJECT_EXPIRED_VOTE_TERM),
        (_vote(term=2, end_index=10), VoteResult.ACCEPT),
        (_vote(term=2, end_term=3, end_index=0), VoteResult.ACCEPT),
    ],
)
async def test_vote_rules(tmp_path: Path, request_: VoteRequest, expected: VoteResult) -> None:
    node = Node(tmp_path)
    resp = await node.elector.handle_vote(request_)
    assert resp.vote_result is expected
    assert resp.term == 2
    assert (resp.local_id, resp.remote_id, resp.leader_id) == (
        request_.local_id, request_.remote_id, request_.leader_id,
    )  # fmt: skip


async def test_accept_persists_the_vote_before_answering(tmp_path: Path) -> None:
    node = Node(tmp_path)
    resp = await node.elector.handle_vote(_vote())
    assert resp.vote_result is VoteResult.ACCEPT
    saved = load_term_state(node.config.base_dir)
    assert (saved.curr_term, saved.vote_leader) == (2, "n1")
    assert "voteLeader=n1" in (node.config.base_dir / "currterm").read_text()
    # the same candidate again: still accepted; another one: already voted / has a leader
    assert (await node.elector.handle_vote(_vote())).vote_result is VoteResult.ACCEPT
    assert (
        await node.elector.handle_vote(_vote("n2"))
    ).vote_result is VoteResult.REJECT_ALREADY_VOTED
    node.state.leader_id = "n1"
    resp = await node.elector.handle_vote(_vote("n2"))
    assert resp.vote_result is VoteResult.REJECT_ALREADY_HAS_LEADER


async def test_larger_term_makes_a_candidate_at_the_old_term(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.state.role = Role.FOLLOWER
    node.state.leader_id = "n2"
    resp = await node.elector.handle_vote(_vote(term=5))
    assert resp.vote_result is VoteResult.REJECT_TERM_NOT_READY
    assert node.state.role is Role.CANDIDATE
    assert node.state.leader_id is None
    assert node.state.curr_term == 2
    assert node.state.known_max_term_in_group == 5
    assert await node.state.next_term() == 5
    assert load_term_state(node.config.base_dir).curr_term == 5


async def test_term_smaller_than_own_ledger(tmp_path: Path) -> None:
    node = Node(tmp_path, term=2, end=(9, 3))
    resp = await node.elector.handle_vote(_vote(term=2, end_term=3, end_index=9))
    assert resp.vote_result is VoteResult.REJECT_TERM_SMALL_THAN_LEDGER
    assert resp.term == 3


def _beat(leader: str, term: int, remote: str = "n0") -> HeartBeatRequest:
    return HeartBeatRequest(
        group="g", remote_id=remote, local_id=leader, leader_id=leader, term=term
    )


async def test_heart_beat_rules(tmp_path: Path) -> None:
    node = Node(tmp_path)
    e = node.elector
    assert (await e.handle_heart_beat(_beat("n9", 2))).code == DLedgerResponseCode.UNKNOWN_MEMBER
    assert (await e.handle_heart_beat(_beat("n0", 2))).code == DLedgerResponseCode.UNEXPECTED_MEMBER
    low = await e.handle_heart_beat(_beat("n1", 1))
    assert (low.code, low.term) == (DLedgerResponseCode.EXPIRED_TERM, 2)
    # same term, no leader yet: follow
    assert (await e.handle_heart_beat(_beat("n1", 2))).code == DLedgerResponseCode.SUCCESS
    assert (node.state.role, node.state.leader_id) == (Role.FOLLOWER, "n1")
    assert (await e.handle_heart_beat(_beat("n1", 2))).code == DLedgerResponseCode.SUCCESS
    assert (
        await e.handle_heart_beat(_beat("n2", 2))
    ).code == DLedgerResponseCode.INCONSISTENT_LEADER
    high = await e.handle_heart_beat(_beat("n2", 4))
    assert high.code == DLedgerResponseCode.TERM_NOT_READY
    assert node.state.role is Role.CANDIDATE
    assert node.state.curr_term == 2


def test_peers_parse() -> None:
    assert parse_peers(PEERS) == {
        "n0": "127.0.0.1:40911", "n1": "127.0.0.1:40912", "n2": "127.0.0.1:40913",
    }  # fmt: skip
    with pytest.raises(ValueError, match="bad"):
        parse_peers("n0:127.0.0.1")
    with pytest.raises(ValueError, match="twice"):
        parse_peers("n0-a:1;n0-b:2")
    with pytest.raises(ValueError, match="not in"):
        DLedgerMemberConfig(group="g", self_id="n5", peers=PEERS, store_base_dir=Path("/x"))
