"""Golden bytes of the stored message record (message-format.md section 1)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.message.decoder import decode_record
from rocketpy.common.message.properties import tags_code
from rocketpy.common.message.record import MAGIC_V1, MAGIC_V2, MessageRecord, encode_record
from rocketpy.store.commit_log.record import CheckStatus, check_record
from rocketpy.store.consume_queue.reput import scan_record

HERE = Path(__file__).parent / "store"


def _load_hex(path: Path) -> bytes:
    """Hex per line with ``# comments``."""
    out = bytearray()
    for raw in path.read_text(encoding="utf-8").splitlines():
        text = raw.split("#", 1)[0].strip()
        if text:
            out += bytes.fromhex(text)
    return bytes(out)


V1_RECORD = MessageRecord(
    topic="TopicTest",
    queue_id=3,
    body=b"Hello",
    queue_offset=7,
    physical_offset=4096,
    born_timestamp=1700000000123,
    born_host=("10.0.0.1", 54321),
    store_timestamp=1700000000124,
    store_host=("192.168.1.2", 10911),
    properties="TAGS\x01TagA\x02KEYS\x01k1\x02",
)

V2_RECORD = MessageRecord(
    topic="T",
    queue_id=0,
    body=b"",
    flag=1,
    sys_flag=0x30,
    born_timestamp=1,
    born_host=("::1", 1),
    store_timestamp=2,
    store_host=("fe80::1", 2),
    magic=MAGIC_V2,
)


def test_record_golden_v1_ipv4() -> None:
    """1. Encode the v1/IPv4 case. 2. Decode the golden bytes.
    Expected: byte-identical to the field-per-line golden; decoding gives the same record."""
    golden = _load_hex(HERE / "record_v1_ipv4.hex")
    assert len(golden) == 123
    assert encode_record(V1_RECORD) == golden
    assert decode_record(golden) == V1_RECORD
    assert V1_RECORD.property_map() == {"TAGS": "TagA", "KEYS": "k1"}


def test_record_golden_v2_ipv6() -> None:
    """1. Encode the v2/IPv6 case. 2. Decode the golden bytes.
    Expected: byte-identical (int16 topic length, 16-byte addresses); decode round-trips."""
    golden = _load_hex(HERE / "record_v2_ipv6.hex")
    assert encode_record(V2_RECORD) == golden
    assert decode_record(golden) == V2_RECORD


_ipv4 = st.ip_addresses(v=4).map(str)
_ipv6 = st.ip_addresses(v=6).map(str)
_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"),
    max_size=20,
)


@st.composite
def _records(draw: st.DrawFn) -> MessageRecord:
    topic = draw(st.text(min_size=1, max_size=200).filter(lambda t: len(t.encode()) < 32767))
    magic = MAGIC_V2 if len(topic.encode()) > 127 else draw(st.sampled_from([MAGIC_V1, MAGIC_V2]))
    born_host = draw(st.one_of(_ipv4, _ipv6))
    store_host = draw(st.one_of(_ipv4, _ipv6))
    sys_flag = draw(st.integers(0, 0x70F)) & ~0x30
    sys_flag |= (0x10 if ":" in born_host else 0) | (0x20 if ":" in store_host else 0)
    props = draw(st.dictionaries(_text.filter(bool), _text.filter(bool), max_size=5))
    return MessageRecord(
        topic=topic,
        queue_id=draw(st.integers(-(2**31), 2**31 - 1)),
        body=draw(st.binary(max_size=300)),
        flag=draw(st.integers(-(2**31), 2**31 - 1)),
        queue_offset=draw(st.integers(0, 2**63 - 1)),
        physical_offset=draw(st.integers(0, 2**63 - 1)),
        sys_flag=sys_flag,
        born_timestamp=draw(st.integers(0, 2**62)),
        born_host=(born_host, draw(st.integers(0, 65535))),
        store_timestamp=draw(st.integers(0, 2**62)),
        store_host=(store_host, draw(st.integers(0, 65535))),
        reconsume_times=draw(st.integers(0, 16)),
        prepared_transaction_offset=draw(st.integers(0, 2**62)),
        properties="".join(f"{k}\x01{v}\x02" for k, v in props.items()),
        magic=magic,
    )


@given(_records())
def test_record_round_trip(rec: MessageRecord) -> None:
    """1. Encode an arbitrary record. 2. Check and decode it.
    Expected: VALID with size == encoded length; decoded record equals the original."""
    raw = encode_record(rec)
    check = check_record(raw)
    assert check.status is CheckStatus.VALID
    assert check.size == len(raw)
    assert check.record == rec
    assert rec.magic in (MAGIC_V1, MAGIC_V2)


@given(_records(), st.booleans())
def test_record_reput_scan_agrees_with_full_decode(rec: MessageRecord, check_crc: bool) -> None:
    """1. Encode an arbitrary record (v1/v2 magic, IPv4/IPv6 hosts). 2. Scan it as the reput
    service does (no body copy, hosts skipped). 3. Scan every strict prefix and a flipped body.
    Expected: the dispatch fields equal the full decoder's; every prefix is invalid (-1); a body
    whose CRC no longer matches is invalid only when CRC checking is on."""
    raw = encode_record(rec)
    req, size = scan_record(memoryview(raw), 4096, check_crc=check_crc)
    assert size == len(raw)
    assert req is not None
    props = rec.property_map()
    assert (req.topic, req.queue_id, req.consume_queue_offset) == (
        rec.topic,
        rec.queue_id,
        rec.queue_offset,
    )
    assert (req.sys_flag, req.store_timestamp, req.commit_log_offset, req.msg_size) == (
        rec.sys_flag,
        rec.store_timestamp,
        4096,
        len(raw),
    )
    assert req.prepared_transaction_offset == rec.prepared_transaction_offset
    assert req.properties == rec.properties
    assert req.tags_code == tags_code(props.get("TAGS"))
    for cut in range(8, len(raw)):  # the reput reads only where 8 bytes are written
        assert scan_record(memoryview(raw[:cut]), 0, check_crc=check_crc) == (None, -1)
    if rec.body:
        topic_width = 2 if rec.magic == MAGIC_V2 else 1
        tail = topic_width + len(rec.topic.encode()) + 2 + len(rec.properties.encode())
        body_at = len(raw) - tail - len(rec.body)
        flipped = bytearray(raw)
        flipped[body_at] ^= 0xFF
        expected = -1 if check_crc else len(raw)
        assert scan_record(memoryview(bytes(flipped)), 0, check_crc=check_crc)[1] == expected
