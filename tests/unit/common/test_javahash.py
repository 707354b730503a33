"""Java's String.hashCode, computed from base-31 numerals, against the stepwise definition."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy.common.javahash import java_string_hash, java_string_hashes


def _java_loop(text: str) -> int:
    """The definition, step by step with int32 overflow: h = 31*h + c over UTF-16 units."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


# Every UTF-16 code unit, lone surrogates included (st.text never draws those).
_UNITS = st.lists(st.integers(0, 0xFFFF), max_size=300).map(lambda us: "".join(map(chr, us)))


@given(st.text(max_size=300))
def test_javahash_equals_the_stepwise_definition(text: str) -> None:
    """1. Any text, ASCII or not, short or longer than every earlier one.
    Expected: the hash equals the step-by-step int32 definition."""
    assert java_string_hash(text) == _java_loop(text)


@given(_UNITS)
def test_javahash_any_code_units_equal_the_definition(text: str) -> None:
    """1. A string of arbitrary UTF-16 code units (lone and paired surrogates, 0xFFFF, NUL).
    Expected: the hash equals the step-by-step definition."""
    assert java_string_hash(text) == _java_loop(text)


@settings(max_examples=60)
@given(
    st.integers(0, 1100),
    st.sampled_from(["a", "\x7f", "\xff", "\u4e2d", "\ud83d", "\U0001f600"]),
    st.text(max_size=5),
)
def test_javahash_long_texts_across_chunks_equal_the_definition(
    n: int, filler: str, tail: str
) -> None:
    """1. ``n`` copies of an ASCII, Latin-1, CJK, lone-surrogate or emoji character plus a tail,
    so lengths fall on, just below and just above the internal chunk sizes.
    Expected: the hash equals the step-by-step definition."""
    text = filler * n + tail
    assert java_string_hash(text) == _java_loop(text)


def test_javahash_known_java_values() -> None:
    """Values printed by Java: "" 0, "hello" 99162322, "abc" 96354, "TagA" 2598919,
    "polygenelubricants" Integer.MIN_VALUE, "中" 20013; a lone surrogate is one unit, an emoji
    two."""
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("abc") == 96354
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("中") == 20013
    assert java_string_hash("\ud800") == 0xD800
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


def test_javahash_chunk_and_short_boundaries_equal_the_definition() -> None:
    """1. Varied ASCII and non-ASCII texts of every length around the short-text cut (8) and the
    chunk size (128), and of several chunks.
    Expected: each hash equals the step-by-step definition."""
    for n in [*range(20), *range(120, 140), *range(250, 262), 385, 1024, 4500]:
        for alphabet in ("abcXYZ09#_", "é\x00ÿ中\ud800"):
            text = "".join(alphabet[(i * 7 + n) % len(alphabet)] for i in range(n))
            assert java_string_hash(text) == _java_loop(text), (n, alphabet)


@given(
    st.one_of(st.just(""), st.just("TopicTest#"), st.text(max_size=40)),
    st.one_of(
        st.lists(st.one_of(st.text(max_size=200), st.text("0123456789ABCDEF#_", max_size=140))),
        # Only '0'..'N' (UNIQ_KEYs: one numeral each), with the bytes just outside in some.
        st.lists(st.text("0123456789ABCDEFN", max_size=140)),
        st.lists(st.text("0N/O", max_size=140)),
    ),
)
def test_javahash_of_many_equals_the_definition(prefix: str, texts: list[str]) -> None:
    """1. A prefix (none, a topic's, any text) and a list of texts, ASCII (index keys) or not,
    of every length class (empty, below the short cut, one chunk, several), some only of
    '0'..'N' (upper-case hex: UNIQ_KEYs).
    Expected: java_string_hashes gives each prefixed text's step-by-step hash, in order."""
    assert java_string_hashes(prefix, texts) == [_java_loop(prefix + t) for t in texts]
