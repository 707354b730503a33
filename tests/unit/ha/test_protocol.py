"""HA stream readers: arbitrary chunking, garbage rejection (ha.md sections 2 and 3)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.ha import protocol as p
from rocketpy.store.epoch_entries import EpochEntry


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


frames_st = st.lists(
    st.tuples(st.integers(0, 2**62), st.binary(max_size=64)), min_size=1, max_size=8
)
cuts_st = st.lists(st.integers(0, 10_000), max_size=12)


@given(frames=frames_st, cuts=cuts_st)
def test_classic_frame_reader_any_chunking(
    frames: list[tuple[int, bytes]], cuts: list[int]
) -> None:
    """1. Encode several classic frames back to back. 2. Feed them in arbitrary chunks.
    Expected: the same frames, in order, nothing left over."""
    stream = b"".join(p.encode_classic_frame(o, b) for o, b in frames)
    reader = p.ClassicFrameReader()
    got = [f for chunk in _chunks(stream, cuts) for f in reader.feed(chunk)]
    assert got == [p.ClassicFrame(offset=o, body=b) for o, b in frames]


@given(offsets=st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=6), cuts=cuts_st)
def test_offset_report_reader_keeps_last_complete(offsets: list[int], cuts: list[int]) -> None:
    """1. Encode several reports. 2. Feed them in arbitrary chunks.
    Expected: the last value returned by any feed is the last report sent."""
    stream = b"".join(p.encode_offset_report(o) for o in offsets)
    reader = p.OffsetReportReader()
    seen = [v for chunk in _chunks(stream, cuts) if (v := reader.feed(chunk)) is not None]
    assert seen[-1] == offsets[-1]
    assert set(seen) <= set(offsets)


@given(cuts=cuts_st, learner=st.booleans(), broker_id=st.integers(0, 2**40))
def test_slave_message_reader_any_chunking(cuts: list[int], learner: bool, broker_id: int) -> None:
    """1. Encode HANDSHAKE then two TRANSFER reports. 2. Feed in arbitrary chunks.
    Expected: the three messages in order."""
    hs = p.Handshake(is_async_learner=learner, slave_broker_id=broker_id)
    stream = p.encode_handshake(hs) + p.encode_transfer_report(5) + p.encode_transfer_report(9)
    reader = p.SlaveMessageReader()
    got = [m for chunk in _chunks(stream, cuts) for m in reader.feed(chunk)]
    assert got == [hs, p.TransferReport(slave_max_offset=5), p.TransferReport(slave_max_offset=9)]


@given(cuts=cuts_st, body=st.binary(max_size=100))
def test_master_message_reader_any_chunking(cuts: list[int], body: bytes) -> None:
    """1. Encode a handshake response, a heartbeat and a data TRANSFER frame (5.1.1 layout).
    2. Feed in arbitrary chunks. Expected: the three messages in order."""
    resp = p.HandshakeResponse(
        master_max_offset=77, last_epoch=3,
        entries=(EpochEntry(epoch=1, start_offset=0), EpochEntry(epoch=3, start_offset=40)),
    )  # fmt: skip
    beat = p.TransferFrame(offset=40, epoch=3, epoch_start_offset=40, confirm_offset=40)
    data = p.TransferFrame(offset=40, epoch=3, epoch_start_offset=40, confirm_offset=-1, body=body)
    stream = (
        p.encode_handshake_response(resp) + p.encode_transfer_frame(beat)
        + p.encode_transfer_frame(data)
    )  # fmt: skip
    reader = p.MasterMessageReader()
    got = [m for chunk in _chunks(stream, cuts) for m in reader.feed(chunk)]
    assert got == [resp, beat, data]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (p.CLASSIC_HEADER.pack(0, p.MAX_HA_BODY + 1), "bodySize"),
        (p.CLASSIC_HEADER.pack(0, -1), "bodySize"),
        (p.CLASSIC_HEADER.pack(-5, 0), "masterPhyOffset"),
    ],
)
def test_classic_frame_reader_rejects_garbage(data: bytes, field: str) -> None:
    """1. Feed a header with an oversize, negative size or negative offset.
    Expected: HACodecError naming the field, before any body bytes arrive."""
    with pytest.raises(p.HACodecError) as info:
        p.ClassicFrameReader().feed(data)
    assert info.value.field == field


def test_offset_report_reader_rejects_negative() -> None:
    """1. Feed a valid report then a negative one. Expected: HACodecError at offset 8."""
    reader = p.OffsetReportReader()
    assert reader.feed(p.encode_offset_report(1)) == 1
    with pytest.raises(p.HACodecError) as info:
        reader.feed(p.OFFSET_REPORT.pack(-1))
    assert info.value.offset == 8


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (p.STATE.pack(3) + bytes(12), "state"),
        (p.STATE.pack(0), "state"),
        (p.TRANSFER_REPORT.pack(2, -2), "slaveMaxOffset"),
    ],
)
def test_slave_message_reader_rejects_garbage(data: bytes, field: str) -> None:
    """1. Feed a SUSPEND/READY state or a negative ack. Expected: HACodecError on that field."""
    with pytest.raises(p.HACodecError) as info:
        p.SlaveMessageReader().feed(data)
    assert info.value.field == field


def test_slave_message_reader_v510_rejects_bad_address_length() -> None:
    """1. Feed a 5.1.0 handshake whose address length is negative.
    Expected: HACodecError on addressLength."""
    with pytest.raises(p.HACodecError) as info:
        p.SlaveMessageReader(p.HAVersion.V5_1_0).feed(p.HANDSHAKE_V500_HEAD.pack(1, 0, 0, -1))
    assert info.value.field == "addressLength"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (p.STATE.pack(7), "state"),
        (p.HANDSHAKE_RESPONSE_HEADER.pack(1, 13, 0, 1), "bodySize"),
        (p.HANDSHAKE_RESPONSE_HEADER.pack(1, 12, 0, 1) + p.EPOCH_ENTRY.pack(1, -4), "startOffset"),
        (p.TRANSFER_HEADER.pack(2, p.MAX_HA_BODY + 1, 0, 1, 0, 0), "bodySize"),
        (p.TRANSFER_HEADER.pack(2, 0, -1, 1, 0, 0), "offset"),
    ],
)
def test_master_message_reader_rejects_garbage(data: bytes, field: str) -> None:
    """1. Feed an unknown state, a body that is not 12 x n, a negative entry offset, an
    oversize TRANSFER body, a negative TRANSFER offset. Expected: HACodecError on that field."""
    with pytest.raises(p.HACodecError) as info:
        p.MasterMessageReader().feed(data)
    assert info.value.field == field


def test_master_message_reader_respects_custom_limit() -> None:
    """1. A reader limited to 16-byte bodies gets a 17-byte TRANSFER header.
    Expected: HACodecError; a 16-byte body passes."""
    ok = p.TransferFrame(offset=0, epoch=1, epoch_start_offset=0, confirm_offset=0, body=bytes(16))
    assert p.MasterMessageReader(max_body=16).feed(p.encode_transfer_frame(ok)) == [ok]
    with pytest.raises(p.HACodecError):
        p.MasterMessageReader(max_body=16).feed(p.TRANSFER_HEADER.pack(2, 17, 0, 1, 0, 0))
