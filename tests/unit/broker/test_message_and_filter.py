"""Unique ids and tag filtering."""

from __future__ import annotations

import pytest

from rocketpy.broker.filter import build_subscription, matches_tags_code, tags_hash_code
from rocketpy.common.message.client_id import UniqIdGenerator


def test_uniq_id_generator_is_unique_and_32_hex() -> None:
    """Two ids in the same millisecond differ (counter) and are 32 hex characters."""
    gen = UniqIdGenerator("10.0.0.5", 1234, 99)
    a, b = gen.create(1_700_000_000_000), gen.create(1_700_000_000_000)
    assert a != b
    assert len(a) == 32
    assert a.startswith("0A000005")


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
