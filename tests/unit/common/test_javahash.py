"""Java's String.hashCode, computed as a dot product."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.javahash import java_string_hash


def _java_loop(text: str) -> int:
    """The definition, step by step with int32 overflow: h = 31*h + c over UTF-16 units."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


@given(st.text(max_size=300))
def test_javahash_equals_the_stepwise_definition(text: str) -> None:
    """1. Any text, ASCII or not, short or longer than every earlier one.
    Expected: the dot-product hash equals the step-by-step int32 definition."""
    assert java_string_hash(text) == _java_loop(text)


def test_javahash_known_java_values() -> None:
    """Values printed by Java: "" 0, "TagA" 2598919, "polygenelubricants" Integer.MIN_VALUE,
    a lone surrogate is one unit, an emoji two."""
    assert java_string_hash("") == 0
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("\ud800") == 0xD800
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
