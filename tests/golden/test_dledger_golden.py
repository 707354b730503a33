"""Golden bytes of the DLedger peer messages, log records and hard state (our msgpack formats,
STYLE.md section 6), plus codec round-trips and decode errors."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.errors import CodecError
from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.log import decode_hard_state, encode_hard_state, encode_record
from rocketpy.dledger.messages import (
    AppendRequest,
    AppendResponse,
    Entry,
    EntryKind,
    HardState,
    HeartbeatRequest,
    HeartbeatResponse,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    Message,
    ResponseCode,
    SnapshotMeta,
    TakeLeadershipRequest,
    VoteRequest,
    VoteResponse,
    VoteResult,
    decode_entry,
    decode_message,
    encode_message,
)
from tests.helpers.golden import load_hex

HERE = Path(__file__).parent / "dledger"


VOTE = VoteRequest(
    from_id="n0",
    to_id="n1",
    term=Term(5),
    ledger_end_term=Term(4),
    ledger_end_index=LogIndex(300),
    vote_round=2,
)
APPEND = AppendRequest(
    from_id="n0",
    to_id="n2",
    term=Term(2),
    prev_index=LogIndex(1),
    prev_term=Term(1),
    entries=(Entry(term=Term(2), index=LogIndex(2), kind=EntryKind.NOOP),),
    commit_index=LogIndex(1),
)


@pytest.mark.parametrize(("case", "msg"), [("vote_request", VOTE), ("append_request", APPEND)])
def test_dledger_message_golden(case: str, msg: Message) -> None:
    """1. Encode the message. 2. Decode the golden bytes. Expected: both match exactly."""
    golden = load_hex(HERE / f"{case}.hex")
    assert encode_message(msg) == golden
    assert decode_message(golden) == msg


def test_dledger_record_golden() -> None:
    """A framed log record: length, CRC32, msgpack entry."""
    entry = Entry(term=Term(3), index=LogIndex(7), data=b"ab")
    golden = load_hex(HERE / "record_entry.hex")
    assert encode_record(entry) == golden
    assert decode_entry(golden[8:]) == entry


def test_dledger_hard_state_golden() -> None:
    """The hardstate file: CRC32 then msgpack [1, term, vote, commit]."""
    hs = HardState(term=Term(5), vote="n1", commit=LogIndex(9))
    golden = load_hex(HERE / "hardstate.hex")
    assert encode_hard_state(hs) == golden
    assert decode_hard_state(golden) == hs


_ids = st.sampled_from(["n0", "n1", "n2", "controller-7"])
_u = st.integers(min_value=0, max_value=2**62)
_entries = st.lists(
    st.builds(
        Entry,
        term=_u,
        index=_u,
        kind=st.sampled_from(EntryKind),
        data=st.binary(max_size=64),
    ),
    max_size=4,
).map(tuple)
_messages = st.one_of(
    st.builds(
        VoteRequest,
        from_id=_ids,
        to_id=_ids,
        term=_u,
        ledger_end_term=_u,
        ledger_end_index=_u,
        vote_round=_u,
    ),
    st.builds(
        VoteResponse,
        from_id=_ids,
        to_id=_ids,
        term=_u,
        request_term=_u,
        vote_round=_u,
        result=st.sampled_from(VoteResult),
    ),
    st.builds(HeartbeatRequest, from_id=_ids, to_id=_ids, term=_u, commit_index=_u, beat_round=_u),
    st.builds(
        HeartbeatResponse,
        from_id=_ids,
        to_id=_ids,
        term=_u,
        beat_round=_u,
        code=st.sampled_from(ResponseCode),
    ),
    st.builds(
        AppendRequest,
        from_id=_ids,
        to_id=_ids,
        term=_u,
        prev_index=_u,
        prev_term=_u,
        entries=_entries,
        commit_index=_u,
    ),
    st.builds(
        AppendResponse,
        from_id=_ids,
        to_id=_ids,
        term=_u,
        code=st.sampled_from(ResponseCode),
        index=_u,
        hint=_u,
    ),
    st.builds(
        InstallSnapshotRequest,
        from_id=_ids,
        to_id=_ids,
        term=_u,
        meta=st.builds(SnapshotMeta, index=_u, term=_u),
        data=st.binary(max_size=64),
    ),
    st.builds(
        InstallSnapshotResponse,
        from_id=_ids,
        to_id=_ids,
        term=_u,
        code=st.sampled_from(ResponseCode),
        index=_u,
    ),
    st.builds(TakeLeadershipRequest, from_id=_ids, to_id=_ids, term=_u, ledger_end_index=_u),
)


@given(_messages)
def test_dledger_message_round_trip(msg: Message) -> None:
    """Every message type survives encode -> decode unchanged."""
    assert decode_message(encode_message(msg)) == msg


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b"\xc1", "message"),  # never-used msgpack byte
        (msgpack.packb({"a": 1}), "message"),
        (msgpack.packb([2, 1]), "message.version"),
        (msgpack.packb([1, 99]), "message.type"),
        (msgpack.packb([1, 1, "n0", "n1", 5, 4, 300]), "VoteRequest"),
        (msgpack.packb([1, 1, "n0", "n1", "5", 4, 300, 2]), "VoteRequest.term"),
        (msgpack.packb([1, 1, "n0", "n1", True, 4, 300, 2]), "VoteRequest.term"),
        (msgpack.packb([1, 2, "n0", "n1", 1, 1, 1, 77]), "VoteResponse.result"),
        (msgpack.packb([1, 5, "n0", "n1", 1, 0, 0, [[1, 1, 0]], 0]), "AppendRequest.entries[0]"),
    ],
)
def test_dledger_decode_errors_name_the_field(raw: bytes, field: str) -> None:
    """Malformed input raises CodecError naming the field (never a crash, never pickle)."""
    with pytest.raises(CodecError) as info:
        decode_message(raw)
    assert info.value.field == field
