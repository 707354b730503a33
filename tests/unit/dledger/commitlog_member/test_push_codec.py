"""The leader's hand-written APPEND push bodies (push_codec) against the generic fastjson encoder
and the golden bytes: the wire must not change."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.dledger.commitlog_member.protocol import (
    PushEntryRequest,
    PushType,
    decode_body,
    encode_body,
)
from rocketpy.dledger.commitlog_member.push_codec import (
    PushFragments,
    encode_append,
    entry_fragment,
)
from rocketpy.store.dledger_log.entry import DLedgerEntry
from rocketpy.store.dledger_log.store import DLedgerLogStore, DLedgerStoreConfig

GOLDEN = Path(__file__).parents[3] / "golden" / "dledger_json"


def _fast(req: PushEntryRequest) -> bytes:
    entries = req.entries()
    return encode_append(
        group=req.group, local_id=req.local_id, remote_id=req.remote_id,
        leader_id=req.leader_id, term=req.term, commit_index=req.commit_index,
        fragments=[entry_fragment(e) for e in entries], first_index=req.first_entry_index,
        last_index=req.last_entry_index, total_size=req.total_size, batch=req.is_batch,
    )  # fmt: skip


@pytest.mark.parametrize("case", ["push_append_request", "push_batch_request"])
def test_matches_golden(case: str) -> None:
    golden = (GOLDEN / f"{case}.json").read_bytes()
    assert _fast(decode_body(golden, PushEntryRequest)) == golden


_ids = st.none() | st.text(max_size=6)
_entries = st.lists(
    st.builds(
        DLedgerEntry,
        index=st.integers(0, 2**40),
        term=st.integers(0, 2**31),
        pos=st.integers(0, 2**50),
        body=st.binary(max_size=40),
        channel=st.integers(-(2**31), 2**31 - 1),
        chain_crc=st.integers(-(2**31), 2**31 - 1),
        body_crc=st.integers(-(2**31), 2**31 - 1),
    ),
    min_size=1,
    max_size=4,
)


@given(
    group=_ids, local=_ids, remote=_ids, leader=_ids, term=st.integers(-1, 2**31),
    commit=st.integers(-1, 2**40), entries=_entries, batch=st.booleans(),
)  # fmt: skip
def test_matches_encode_body(
    *, group: str | None, local: str | None, remote: str | None, leader: str | None,
    term: int, commit: int, entries: list[DLedgerEntry], batch: bool,
) -> None:  # fmt: skip
    if batch:
        req = PushEntryRequest(
            group=group, local_id=local, remote_id=remote, leader_id=leader, term=term,
            commit_index=commit, type=PushType.APPEND, batch_entry=tuple(entries),
            total_size=sum(e.size for e in entries),
        )  # fmt: skip
    else:
        req = PushEntryRequest(
            group=group, local_id=local, remote_id=remote, leader_id=leader, term=term,
            commit_index=commit, type=PushType.APPEND, entry=entries[0],
        )  # fmt: skip
    assert _fast(req) == encode_body(req)


def test_fragments_of_appended_entries_and_of_the_log(tmp_path: Path) -> None:
    """A fragment cached at append equals the one encoded from the log read back; a new term
    of office drops the cache (the log is read again)."""
    store = DLedgerLogStore(
        DLedgerStoreConfig(base_dir=tmp_path, data_file_size=1 << 16, index_file_size=32 * 64)
    )
    store.load()
    try:
        frags = PushFragments(store, capacity=2)
        body = bytes(range(64))
        headers = [store.append_as_leader(body, 3, patch=False) for _ in range(3)]
        for h in headers:
            frags.appended(3, h.index, h.term, h.pos, h.size)
        for h in headers:
            pos, size, text = frags.get(3, h.index)
            assert (pos, size, text) == (h.pos, h.size, entry_fragment(store.get(h.index)))
        assert frags.get(4, 2)[2] == entry_fragment(store.get(2))
    finally:
        store.close()


def test_fragment_from_the_patched_record_equals_the_log(tmp_path: Path) -> None:
    """A bytearray record is patched in place as written (PHYSICALOFFSET, QUEUEOFFSET), so the
    fragment the leader encodes from it equals the one encoded from the log read back."""
    store = DLedgerLogStore(
        DLedgerStoreConfig(base_dir=tmp_path, data_file_size=1 << 16, index_file_size=32 * 64)
    )
    store.load()
    try:
        frags = PushFragments(store)
        for queue_offset in (7, None, 9):
            record = bytearray(range(100))
            h = store.append_as_leader(record, 3, queue_offset=queue_offset)
            assert bytes(record) == store.get(h.index).body != bytes(range(100))
            frags.appended(3, h.index, h.term, h.pos, h.size, record)
            assert frags.get(3, h.index)[2] == entry_fragment(store.get(h.index))
    finally:
        store.close()
