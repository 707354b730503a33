"""DLedger 0.3.1.2 peer bodies against hand-assembled fastjson bytes (tests/golden/dledger_json)
and the decoder's tolerance and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.errors import CodecError
from rocketpy.dledger.commitlog_member.protocol import (
    AppendEntryRequest,
    AppendEntryResponse,
    Base,
    DLedgerResponseCode,
    GetEntriesRequest,
    GetEntriesResponse,
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataResponse,
    PushEntryRequest,
    PushEntryResponse,
    PushType,
    VoteRequest,
    VoteResponse,
    VoteResult,
    code_name,
    decode_body,
    encode_body,
)
from rocketpy.store.dledger_log.entry import DLedgerEntry

GOLDEN = Path(__file__).parents[3] / "golden" / "dledger_json"
G = "RaftNode00"


def _e(index: int, pos: int, body: bytes, term: int = 3) -> DLedgerEntry:
    return DLedgerEntry(index=index, term=term, pos=pos, body=body)


CASES: dict[str, Base] = {
    "vote_request": VoteRequest(
        group=G, local_id="n1", remote_id="n0", leader_id="n1", term=3,
        ledger_end_index=9, ledger_end_term=2,
    ),
    "vote_response": VoteResponse(
        group=G, local_id="n1", remote_id="n0", leader_id="n1", term=3,
        vote_result=VoteResult.REJECT_ALREADY_VOTED,
    ),
    "heart_beat_request": HeartBeatRequest(
        group=G, local_id="n0", remote_id="n2", leader_id="n0", term=3
    ),
    "heart_beat_response_expired": HeartBeatResponse(term=5, code=403),
    "push_append_request": PushEntryRequest(
        group=G, local_id="n0", remote_id="n1", leader_id="n0", term=3, commit_index=7,
        type=PushType.APPEND, entry=_e(8, 400, b"\x00\x01\x02\x03"),
    ),
    "push_batch_request": PushEntryRequest(
        group=G, local_id="n0", remote_id="n1", leader_id="n0", term=3, commit_index=7,
        type=PushType.APPEND, batch_entry=(_e(8, 400, b"a"), _e(9, 449, b"bc")), total_size=99,
    ),
    "push_commit_request": PushEntryRequest(
        group=G, local_id="n0", remote_id="n1", leader_id="n0", term=3, commit_index=7,
        type=PushType.COMMIT,
    ),
    "push_response": PushEntryResponse(
        group=G, term=3, index=8, count=1, begin_index=0, end_index=8
    ),
    "push_commit_response": PushEntryResponse(
        group=G, term=3, count=0, begin_index=0, end_index=8
    ),
    "push_compare_response_inconsistent": PushEntryResponse(
        group=G, term=3, code=406, index=8, count=1, begin_index=-1, end_index=-1
    ),
    "metadata_response": MetadataResponse(
        group=G, leader_id="n0",
        peers={"n2": "127.0.0.1:40913", "n0": "127.0.0.1:40911", "n1": "127.0.0.1:40912"},
    ),
    "append_request": AppendEntryRequest(group=G, remote_id="n0", body=b"hello"),
    "append_response": AppendEntryResponse(group=G, leader_id="n0", term=3, index=5, pos=480),
    "get_request": GetEntriesRequest(group=G, remote_id="n0", begin_index=5),
    "get_response": GetEntriesResponse(group=G, entries=(_e(5, 480, b"hello"),)),
    "leadership_transfer_request": LeadershipTransferRequest(
        group=G, local_id="n0", remote_id="n2", leader_id="n0", term=3,
        transfer_id="n0", transferee_id="n2", take_leadership_ledger_index=99,
    ),
    "leadership_transfer_response": LeadershipTransferResponse(
        group=G, local_id="n0", remote_id="n2", leader_id="n0", term=3, code=418
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_encode_matches_golden(case: str) -> None:
    golden = (GOLDEN / f"{case}.json").read_bytes()
    assert encode_body(CASES[case]) == golden  # type: ignore[arg-type]


@pytest.mark.parametrize("case", sorted(CASES))
def test_decode_golden(case: str) -> None:
    value = CASES[case]
    decoded = decode_body((GOLDEN / f"{case}.json").read_bytes(), type(value))
    if isinstance(value, MetadataResponse):
        assert isinstance(decoded, MetadataResponse)
        assert dict(decoded.peers or {}) == dict(value.peers or {})
        assert decoded.leader_id == value.leader_id
    else:
        assert decoded == value


def test_push_request_getter_extras() -> None:
    batch = CASES["push_batch_request"]
    assert isinstance(batch, PushEntryRequest)
    assert (batch.is_batch, batch.count, batch.first_entry_index, batch.last_entry_index) == (
        True, 2, 8, 9,
    )  # fmt: skip
    commit = CASES["push_commit_request"]
    assert isinstance(commit, PushEntryRequest)
    assert (commit.count, commit.first_entry_index, commit.last_entry_index) == (0, -1, -1)


def test_decode_takes_defaults_and_ignores_unknown_keys() -> None:
    req = decode_body(b'{"group":"g","extra":{"x":1},"remoteId":"n1"}', VoteRequest)
    assert (req.term, req.code, req.ledger_end_index, req.ledger_end_term) == (-1, 200, -1, -1)
    assert req.leader_id is None
    push = decode_body(b'{"type":"COMPARE"}', PushEntryRequest)
    assert push.type is PushType.COMPARE
    assert push.commit_index == -1
    assert push.entries() == ()


_FULL = (
    b'{"batch":true,"batchEntry":[{"body":"YQ==","bodyCrc":0,"chainCrc":0,"channel":0,'
    b'"index":7,"magic":1,"pos":96,"size":49,"term":2}],"type":"APPEND"}'
)


def test_decode_full_entry() -> None:
    """The nine-field entry the refusals below spoil decodes as written."""
    push = decode_body(_FULL, PushEntryRequest)
    assert push.entries() == (DLedgerEntry(index=7, term=2, pos=96, body=b"a"),)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b"not json", VoteRequest),
        (b"[1,2]", VoteRequest),
        (b'{"term":"3"}', VoteRequest),
        (b'{"voteResult":"MAYBE"}', VoteResponse),
        (b'{"type":"SNAPSHOT"}', PushEntryRequest),
        (b'{"entry":{"body":"YQ==","size":50}}', PushEntryRequest),
        (b'{"entry":{"body":"!!"}}', PushEntryRequest),
        # All nine fields, as a leader writes them (the decoder's one-lookup path), one wrong:
        (_FULL.replace(b'"index":7', b'"index":"7"'), PushEntryRequest),
        (_FULL.replace(b'"term":2', b'"term":true'), PushEntryRequest),
        (_FULL.replace(b'"size":49', b'"size":50'), PushEntryRequest),
        (_FULL.replace(b'"YQ=="', b'"Y!=="'), PushEntryRequest),
        (_FULL.replace(b'"YQ=="', b"null"), PushEntryRequest),
        (b'{"peers":{"n0":1}}', MetadataResponse),
    ],
)
def test_decode_refuses(raw: bytes, kind: type[Base]) -> None:
    with pytest.raises(CodecError):
        decode_body(raw, kind)


def test_response_code_names() -> None:
    assert DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT == 502
    assert DLedgerResponseCode.PUSH_REQUEST_IS_FULL == 421
    assert code_name(506) == "LEADER_TRANSFERRING"
    assert code_name(999) == "UNKNOWN"


@given(
    index=st.integers(0, 2**62),
    term=st.integers(0, 2**40),
    pos=st.integers(0, 2**62),
    body=st.binary(max_size=64),
    commit=st.integers(-1, 2**40),
    batch=st.booleans(),
)
def test_push_round_trip(  # noqa: PLR0917 - hypothesis parameters
    index: int, term: int, pos: int, body: bytes, commit: int, batch: bool
) -> None:
    entry = _e(index, pos, body, term)
    req = PushEntryRequest(
        group="g", remote_id="n1", local_id="n0", leader_id="n0", term=term, commit_index=commit,
        entry=None if batch else entry, batch_entry=(entry,) if batch else (),
        total_size=entry.size if batch else 0,
    )  # fmt: skip
    assert decode_body(encode_body(req), PushEntryRequest) == req
