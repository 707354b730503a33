"""Golden bytes of the HA stream (ha.md sections 2 and 3): encode == golden, decode(golden) == v."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.ha import protocol as p
from rocketpy.store.epoch_entries import EpochEntry
from tests.helpers.golden import load_hex

HERE = Path(__file__).parent / "ha"


def test_ha_golden_classic_offset_report() -> None:
    """1. Encode report 74565. 2. Feed the golden bytes to the master's reader.
    Expected: identical 8 bytes; the reader yields 74565."""
    golden = load_hex(HERE / "classic_offset_report.hex")
    assert p.encode_offset_report(74565) == golden
    assert p.OffsetReportReader().feed(golden) == 74565


@pytest.mark.parametrize(
    ("case", "frame"),
    [
        ("classic_frame", p.ClassicFrame(offset=1073741824, body=b"hello")),
        ("classic_heartbeat", p.ClassicFrame(offset=4096, body=b"")),
    ],
)
def test_ha_golden_classic_frame(case: str, frame: p.ClassicFrame) -> None:
    """1. Encode the frame. 2. Feed the golden bytes to the slave's reader.
    Expected: identical bytes; exactly the one frame back."""
    golden = load_hex(HERE / f"{case}.hex")
    assert p.encode_classic_frame(frame.offset, frame.body) == golden
    assert p.ClassicFrameReader().feed(golden) == [frame]


@pytest.mark.parametrize(
    ("case", "version", "msg"),
    [
        ("handshake_v511", p.HAVersion.V5_1_1,
         p.Handshake(is_sync_from_last_file=True, slave_broker_id=2)),
        ("handshake_v510", p.HAVersion.V5_1_0,
         p.Handshake(is_async_learner=True, slave_address="127.0.0.1:10911")),
    ],
)  # fmt: skip
def test_ha_golden_handshake(case: str, version: p.HAVersion, msg: p.Handshake) -> None:
    """1. Encode the slave HANDSHAKE for the version. 2. Decode the golden bytes.
    Expected: identical bytes; the same message back."""
    golden = load_hex(HERE / f"{case}.hex")
    assert p.encode_handshake(msg, version) == golden
    assert p.SlaveMessageReader(version).feed(golden) == [msg]


def test_ha_golden_transfer_report() -> None:
    """1. Encode a TRANSFER report of 3000. 2. Decode the golden bytes.
    Expected: identical 12 bytes; TransferReport(3000)."""
    golden = load_hex(HERE / "transfer_report.hex")
    assert p.encode_transfer_report(3000) == golden
    assert p.SlaveMessageReader().feed(golden) == [p.TransferReport(slave_max_offset=3000)]


@pytest.mark.parametrize(
    ("case", "version", "entries", "last"),
    [
        ("handshake_response_v511", p.HAVersion.V5_1_1,
         (EpochEntry(epoch=1, start_offset=0), EpochEntry(epoch=2, start_offset=1000)), 2),
        ("handshake_response_v500", p.HAVersion.V5_0_0,
         (EpochEntry(epoch=1, start_offset=0),), 1),
    ],
)  # fmt: skip
def test_ha_golden_handshake_response(
    case: str, version: p.HAVersion, entries: tuple[EpochEntry, ...], last: int
) -> None:
    """1. Encode the master's HANDSHAKE response (max offset 8000). 2. Decode the golden bytes.
    Expected: identical bytes; the same entries (no end offsets on the wire)."""
    msg = p.HandshakeResponse(master_max_offset=8000, last_epoch=last, entries=entries)
    golden = load_hex(HERE / f"{case}.hex")
    assert p.encode_handshake_response(msg, version) == golden
    assert p.MasterMessageReader(version).feed(golden) == [msg]


def test_ha_golden_transfer_frame() -> None:
    """1. Encode a TRANSFER frame at 3000 of epoch 2@1000, confirm 2500, 4 body bytes.
    2. Decode the golden bytes. Expected: identical 40 bytes; the same frame back."""
    frame = p.TransferFrame(offset=3000, epoch=2, epoch_start_offset=1000, confirm_offset=2500,
                            body=bytes.fromhex("deadbeef"))  # fmt: skip
    golden = load_hex(HERE / "transfer_frame.hex")
    assert p.encode_transfer_frame(frame) == golden
    assert p.MasterMessageReader().feed(golden) == [frame]
