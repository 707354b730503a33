"""Typed header <-> extFields conversion (remoting.md section 4)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.errors import CodecError
from rocketpy.remoting.protocol.headers.base import (
    MissingHeaderField,
    ext_encoder,
    from_ext,
    to_ext,
    wire,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Header:
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    broker_id: int | None = wire("brokerId", default=None)
    compressed: bool = wire("compressed", default=False)


def test_header_to_ext_renders_java_strings() -> None:
    """Ints in decimal, booleans lowercase, None omitted."""
    h = _Header(topic="T", queue_id=3, compressed=True)
    assert to_ext(h) == {"topic": "T", "queueId": "3", "compressed": "true"}


def test_header_ext_encoder_renders_fields_over_the_template() -> None:
    """1. An encoder of queue_id and compressed over a template header. 2. Encode two sets of
    values. 3. Ask for a field the class does not have.
    Expected: to_ext of the template with those fields replaced, each time; TypeError."""
    template = _Header(topic="T", queue_id=0, broker_id=7)
    encode = ext_encoder(template, ("queue_id", "compressed"))
    for queue_id, compressed in ((3, True), (0, False)):
        want = to_ext(dataclasses.replace(template, queue_id=queue_id, compressed=compressed))
        assert list(encode(queue_id, compressed).items()) == list(want.items())
    assert encode(3, True) == {"topic": "T", "queueId": "3", "brokerId": "7", "compressed": "true"}
    with pytest.raises(TypeError, match="nope"):
        ext_encoder(template, ("nope",))


def test_header_from_ext_parses_like_java() -> None:
    """Boolean.parseBoolean semantics; optional fields keep defaults when absent."""
    h = from_ext(_Header, {"topic": "T", "queueId": " 7", "compressed": "TRUE", "extra": "x"})
    assert h == _Header(topic="T", queue_id=7, compressed=True)
    assert (
        from_ext(_Header, {"topic": "T", "queueId": "1", "compressed": "yes"}).compressed is False
    )


def test_header_missing_mandatory_field_names_it() -> None:
    """A missing mandatory field raises MissingHeaderField with upstream's phrase."""
    with pytest.raises(MissingHeaderField, match="the custom field <queueId> is null"):
        from_ext(_Header, {"topic": "T"})


def test_header_bad_number_names_field() -> None:
    """A non-numeric int field raises CodecError naming the field."""
    with pytest.raises(CodecError, match="field=brokerId"):
        from_ext(_Header, {"topic": "T", "queueId": "1", "brokerId": "x"})


@pytest.mark.parametrize(
    ("field", "value"),
    [("brokerId", str(2**63)), ("brokerId", str(-(2**63) - 1)), ("brokerId", str(2**64))],
)
def test_header_int_beyond_java_long_names_field(field: str, value: str) -> None:
    """A Long field beyond Java's long is refused as Long.parseLong refuses it (the fuzz
    campaign sent appliedBrokerId=2**64 to a controller, whose msgpack event encoder then
    failed with a traceback); the long's own bounds still decode."""
    ext = {"topic": "T", "queueId": "1", field: value}
    with pytest.raises(CodecError, match=f"field={field}"):
        from_ext(_Header, ext)
    edges = {"topic": "T", "queueId": "1", "brokerId": str(-(2**63))}
    assert from_ext(_Header, edges) == _Header(topic="T", queue_id=1, broker_id=-(2**63))
    edges["brokerId"] = str(2**63 - 1)
    assert from_ext(_Header, edges).broker_id == 2**63 - 1


@pytest.mark.parametrize("value", [str(2**31), str(-(2**31) - 1), str(2**33), str(2**63)])
def test_header_java_int_field_beyond_int_names_field(value: str) -> None:
    """A field upstream declares Integer (queueId) is refused beyond 32 bits, as
    Integer.parseInt refuses it; the int's own bounds still decode."""
    with pytest.raises(CodecError, match="field=queueId"):
        from_ext(_Header, {"topic": "T", "queueId": value})
    for edge in (-(2**31), 2**31 - 1):
        assert from_ext(_Header, {"topic": "T", "queueId": str(edge)}).queue_id == edge


@dataclass(slots=True, kw_only=True)
class _Mutable:
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    compressed: bool = wire("compressed", default=False)
    unit_mode: bool | None = wire("unitMode", default=None)


@dataclass(slots=True, kw_only=True)
class _Checked:
    topic: str = wire("topic")

    def __post_init__(self) -> None:
        if not self.topic:
            raise ValueError("empty topic")


def test_decoder_builds_the_same_instance_as_its_init() -> None:
    """1. Decode a mutable header (stored into a new instance, no keyword call) with and without
    its optional fields. 2. Decode a header with __post_init__ (keyword call kept).
    Expected: each equals the instance its __init__ builds from the same values, every field
    set (defaults included); __post_init__ still runs."""
    full = from_ext(
        _Mutable, {"topic": "T", "queueId": "3", "compressed": "TRUE", "unitMode": "false"}
    )
    assert full == _Mutable(topic="T", queue_id=3, compressed=True, unit_mode=False)
    bare = from_ext(_Mutable, {"topic": "T", "queueId": "3"})
    assert bare == _Mutable(topic="T", queue_id=3)
    assert (bare.compressed, bare.unit_mode) == (False, None)
    assert from_ext(_Checked, {"topic": "T"}) == _Checked(topic="T")
    with pytest.raises(ValueError, match="empty topic"):
        from_ext(_Checked, {"topic": ""})
    with pytest.raises(MissingHeaderField):
        from_ext(_Mutable, {"queueId": "3"})


_INT_TEXTS = st.one_of(
    st.integers(-2, 1100).map(str),  # the looked-up small numbers and just past them
    st.integers(-(2**40), 2**40).map(str),
    st.sampled_from([" 7", "7 ", "+3", "007", "-0", "0x1", "", "1.0", "٣"]),
    st.text(max_size=6),
)
_BOOL_TEXTS = st.one_of(
    st.sampled_from(["true", "false", "TRUE", " true ", "False", "yes", "", "1"]),
    st.text(max_size=6),
)


@given(_INT_TEXTS, _BOOL_TEXTS)
def test_decoder_reads_numbers_and_booleans_as_java_parses_them(number: str, flag: str) -> None:
    """1. Decode a header whose int field (Java int) and boolean field hold any text: small
    numbers the decoder looks up, others, spaced, signed, padded, non-numeric.
    Expected: the int is Integer.parseInt's reading (whitespace stripped, as int() reads it)
    or CodecError naming the field; the boolean is Boolean.parseBoolean's."""
    ext = {"topic": "T", "queueId": number, "compressed": flag}
    try:
        want = int(number.strip())
    except ValueError:
        want = None
    if want is None or not -(2**31) <= want < 2**31:
        with pytest.raises(CodecError, match="field=queueId"):
            from_ext(_Header, ext)
        return
    got = from_ext(_Header, ext)
    assert got.queue_id == want
    assert got.compressed is (flag.strip().lower() == "true")
