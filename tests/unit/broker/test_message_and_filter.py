"""Message pieces (properties, ids, batch body) and tag filtering."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.broker.filter import build_subscription, matches_tags_code, tags_hash_code
from rocketpy.broker.message import (
    BatchEntry,
    UniqIdGenerator,
    create_offset_msg_id,
    decode_batch_body,
    decode_offset_msg_id,
    encode_batch_body,
)
from rocketpy.common.errors import CodecError
from rocketpy.store.commit_log.record import decode_properties, encode_properties


def test_properties_decode_rules() -> None:
    """Short segments and segments without an inner separator are dropped; last duplicate wins;
    an empty value disappears (message-format.md section 3)."""
    text = "TAGS\x01A\x02x\x02\x01v\x02EMPTY\x01\x02TAGS\x01B\x02KEYS\x01k1 k2\x02"
    assert decode_properties(text) == {"TAGS": "B", "KEYS": "k1 k2"}
    assert encode_properties({"A": "1", "B": "2"}) == "A\x011\x02B\x012\x02"


def test_offset_msg_id_ipv4_round_trip() -> None:
    """127.0.0.1:10911 at offset 1024 -> 32 upper-case hex characters and back."""
    msg_id = create_offset_msg_id("127.0.0.1", 10911, 1024)
    assert msg_id == "7F00000100002A9F0000000000000400"
    assert decode_offset_msg_id(msg_id) == ("127.0.0.1", 10911, 1024)
    with pytest.raises(CodecError):
        decode_offset_msg_id("ABC")


def test_uniq_id_generator_is_unique_and_32_hex() -> None:
    """Two ids in the same millisecond differ (counter) and are 32 hex characters."""
    gen = UniqIdGenerator("10.0.0.5", 1234, 99)
    a, b = gen.create(1_700_000_000_000), gen.create(1_700_000_000_000)
    assert a != b
    assert len(a) == 32
    assert a.startswith("0A000005")


@given(
    st.lists(
        st.builds(
            BatchEntry,
            flag=st.integers(0, 2**31 - 1),
            body=st.binary(max_size=64),
            properties=st.dictionaries(
                st.text("abcXYZ_", min_size=1, max_size=5),
                st.text("abc 123", min_size=1, max_size=5),
                max_size=3,
            ),
        ),
        max_size=4,
    )
)
def test_batch_body_round_trip(entries: list[BatchEntry]) -> None:
    """decode(encode(batch)) == batch."""
    assert decode_batch_body(encode_batch_body(entries)) == entries


def test_batch_body_truncated_raises() -> None:
    """A body cut inside an entry raises CodecError naming the offset."""
    body = encode_batch_body([BatchEntry(flag=0, body=b"hello", properties={"A": "1"})])
    with pytest.raises(CodecError, match="offset=0"):
        decode_batch_body(body[:-2])


def test_subscription_build_and_match() -> None:
    """'TagA || TagB' matches codes of TagA and TagB only; '*' and None match everything."""
    sub = build_subscription("T", "TagA || TagB")
    assert sub.tags_set == ("TagA", "TagB")
    assert sub.code_set == (2598919, 2598920)
    assert matches_tags_code(sub, tags_hash_code("TagA"))
    assert not matches_tags_code(sub, tags_hash_code("TagC"))
    assert matches_tags_code(build_subscription("T", "*"), 42)
    assert matches_tags_code(None, 42)
    with pytest.raises(ValueError, match="SQL92"):
        build_subscription("T", "a > 1", "SQL92")
