"""Message builders shared by the Raft table tests (etcd raft_paper_test.go style)."""

from __future__ import annotations

from typing import TypeVar

from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.core import Role
from rocketpy.dledger.messages import (
    AppendRequest,
    AppendResponse,
    Entry,
    HardState,
    HeartbeatRequest,
    HeartbeatResponse,
    Message,
    ResponseCode,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from rocketpy.dledger.storage import MemoryStorage
from tests.helpers.raft_net import Solo, solo

T = TypeVar("T")


def entries(*terms: int, start: int = 1) -> list[Entry]:
    """Entries with the given terms at indices start, start+1, ..."""
    return [
        Entry(term=Term(t), index=LogIndex(start + i), data=b"e%d" % (start + i))
        for i, t in enumerate(terms)
    ]


def storage_with(*terms: int, term: int = 0, vote: str | None = None) -> MemoryStorage:
    """A storage holding entries of ``terms`` and the given hard state."""
    st = MemoryStorage()
    st.append(entries(*terms))
    st.set_hard_state(HardState(term=Term(term), vote=vote))
    return st


def vote_req(  # noqa: PLR0917 - positional like the wire fields, for compact tables
    frm: str, to: str, term: int, last_term: int = 0, last_index: int = 0, rnd: int = 1
) -> VoteRequest:
    """A VoteRequest from candidate ``frm``."""
    return VoteRequest(
        from_id=frm,
        to_id=to,
        term=Term(term),
        ledger_end_term=Term(last_term),
        ledger_end_index=LogIndex(last_index),
        vote_round=rnd,
    )


def beat(frm: str, to: str, term: int, commit: int = 0, rnd: int = 1) -> HeartbeatRequest:
    """A HeartbeatRequest from leader ``frm``."""
    return HeartbeatRequest(
        from_id=frm, to_id=to, term=Term(term), commit_index=LogIndex(commit), beat_round=rnd
    )


def append(  # noqa: PLR0917 - positional like the wire fields, for compact tables
    frm: str,
    to: str,
    term: int,
    prev_index: int,
    prev_term: int,
    ents: list[Entry] | None = None,
    commit: int = 0,
) -> AppendRequest:
    """An AppendRequest from leader ``frm``."""
    return AppendRequest(
        from_id=frm,
        to_id=to,
        term=Term(term),
        prev_index=LogIndex(prev_index),
        prev_term=Term(prev_term),
        entries=tuple(ents or ()),
        commit_index=LogIndex(commit),
    )


def append_ok(frm: str, to: str, term: int, index: int) -> AppendResponse:
    """A successful AppendResponse."""
    return AppendResponse(
        from_id=frm,
        to_id=to,
        term=Term(term),
        code=ResponseCode.SUCCESS,
        index=LogIndex(index),
        hint=LogIndex(0),
    )


def of_type(msgs: list[Message], cls: type[T]) -> list[T]:
    """The messages of one class."""
    return [m for m in msgs if isinstance(m, cls)]


def grant_votes(s: Solo, voters: list[str] | None = None) -> None:
    """Answer the core's latest vote round with ACCEPT from ``voters`` (default: all peers)."""
    requests = of_type(s.sent, VoteRequest)
    last = requests[-1]
    for voter in voters if voters is not None else list(s.core.others):
        s.step(
            VoteResponse(
                from_id=voter,
                to_id=s.core.id,
                term=last.term,
                request_term=last.term,
                vote_round=last.vote_round,
                result=VoteResult.ACCEPT,
            )
        )


def make_leader(s: Solo) -> None:
    """campaign() and win; afterwards the core is leader with its NOOP appended."""
    s.core.campaign()
    s.drain()
    grant_votes(s)
    assert s.core.role is Role.LEADER


def beat_ok(frm: str, to: str, term: int, rnd: int) -> HeartbeatResponse:
    """A successful HeartbeatResponse."""
    return HeartbeatResponse(
        from_id=frm, to_id=to, term=Term(term), beat_round=rnd, code=ResponseCode.SUCCESS
    )


def follower_of(leader: str, term: int, *terms: int, node_id: str = "n0") -> Solo:
    """A member restarted in ``term`` (log of ``terms``) that has accepted ``leader``."""
    s = solo(node_id, storage=storage_with(*terms, term=term))
    s.step(beat(leader, node_id, term))
    assert s.core.role is Role.FOLLOWER
    return s
