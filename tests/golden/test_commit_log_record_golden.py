"""CommitLog record: golden bytes assembled field by field, and round trips (message-format 1)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rocketpy.store.commit_log.record import Host, MessageRecord, decode_record, encode_record
from tests.helpers.golden import load_hex

HERE = Path(__file__).parent / "commit_log"

GOLDEN = MessageRecord(
    topic="TopicTest",
    body=b"Hello RocketMQ",
    queue_id=3,
    queue_offset=42,
    physical_offset=4096,
    born_timestamp=1700000000000,
    born_host=Host("127.0.0.1", 54321),
    store_timestamp=1700000000005,
    store_host=Host("127.0.0.1", 10911),
    properties="TAGS\x01TagA\x02KEYS\x01k1\x02",
)


def test_commit_log_record_golden_v1_ipv4() -> None:
    """1. Encode the record. 2. Compare with the field-per-line golden. 3. Decode it back."""
    golden = load_hex(HERE / "record_v1_ipv4.hex")
    assert encode_record(GOLDEN) == golden
    decoded = decode_record(golden)
    assert decoded == dataclasses.replace(GOLDEN, body_crc=0x69C865ED)


hosts = st.one_of(
    st.builds(Host, st.ip_addresses(v=4).map(str), st.integers(0, 65535)),
    st.builds(Host, st.ip_addresses(v=6).map(lambda a: a.compressed), st.integers(0, 65535)),
)
records = st.builds(
    MessageRecord,
    topic=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
    body=st.binary(max_size=300),
    queue_id=st.integers(0, 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    queue_offset=st.integers(0, 2**63 - 1),
    physical_offset=st.integers(0, 2**63 - 1),
    sys_flag=st.integers(0, 0x70F),
    born_timestamp=st.integers(0, 2**62),
    born_host=hosts,
    store_timestamp=st.integers(0, 2**62),
    store_host=hosts,
    reconsume_times=st.integers(0, 32),
    prepared_transaction_offset=st.integers(0, 2**62),
    properties=st.text(st.characters(blacklist_categories=("Cs",)), max_size=60),
)


@given(records, st.booleans())
def test_commit_log_record_round_trip(rec: MessageRecord, v2: bool) -> None:
    """decode(encode(r)) keeps every field (sysflag gains the IPv6 bits of the hosts)."""
    if len(rec.topic.encode()) > 127:
        v2 = True
    data = encode_record(rec, v2=v2)
    back = decode_record(data)
    assert back.sys_flag == rec.effective_sys_flag
    assert (back.topic, back.body, back.properties) == (rec.topic, rec.body, rec.properties)
    assert (back.born_host, back.store_host) == (
        Host(rec.born_host.address, rec.born_host.port),
        Host(rec.store_host.address, rec.store_host.port),
    )
    assert (back.queue_offset, back.physical_offset, back.prepared_transaction_offset) == (
        rec.queue_offset,
        rec.physical_offset,
        rec.prepared_transaction_offset,
    )
    assert len(data) == int.from_bytes(data[:4], "big")
