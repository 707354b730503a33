"""Frame and header codecs: client quirks, limits, malformed input, hypothesis round trips."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.codes import LanguageCode
from rocketpy.common.errors import CodecError, FrameTooLarge
from rocketpy.remoting.protocol import header_json, header_rocketmq
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import (
    FrameLimits,
    SerializeType,
    decode_frame,
    decode_frame_in,
    encode_frame,
    read_length,
)

int32 = st.integers(-(2**31), 2**31 - 1)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
nonempty = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)


@st.composite
def commands(draw: st.DrawFn, *, binary: bool = False) -> RemotingCommand:
    """Commands representable in the chosen encoding."""
    return RemotingCommand(
        code=draw(st.integers(-32768, 32767) if binary else int32),
        language=draw(st.sampled_from(list(LanguageCode))).value,
        version=draw(st.integers(-32768, 32767) if binary else int32),
        opaque=draw(int32),
        flag=draw(int32),
        remark=draw(st.none() | (nonempty if binary else text)),
        ext_fields=draw(
            st.none() | st.dictionaries(nonempty, nonempty if binary else text, max_size=6)
        ),
        body=draw(st.none() | st.binary(min_size=1, max_size=64)),
    )


@given(commands())
def test_frame_json_round_trip(cmd: RemotingCommand) -> None:
    """decode(encode(cmd)) == cmd for the JSON header."""
    assert decode_frame(encode_frame(cmd)[4:]) == cmd


@given(commands(binary=True))
def test_frame_rocketmq_round_trip(cmd: RemotingCommand) -> None:
    """decode(encode(cmd)) == cmd for ROCKETMQ headers (non-empty strings: '' reads as null)."""
    if cmd.ext_fields == {}:
        cmd.ext_fields = None
    decoded = decode_frame(encode_frame(cmd, SerializeType.ROCKETMQ)[4:])
    decoded.serialize_type = 0
    assert decoded == cmd


def test_header_json_cpp_client_shape() -> None:
    """The C++ client: insertion-ordered keys, numbers inside extFields, trailing newline."""
    raw = (
        b'{"code":310,"language":"CPP","version":333,"opaque":7,"flag":0,"remark":"",'
        b'"extFields":{"a":"pg","queueId":3,"sysFlag":0,"jstackEnable":false,"e":"1",'
        b'"Signature":"","AccessKey":"","OnsChannel":""}}\n'
    )
    cmd = header_json.decode_header(raw)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.remark) == (310, 1, 333, 7, "")
    assert cmd.ext_fields is not None
    assert cmd.ext_fields["queueId"] == "3"
    assert cmd.ext_fields["jstackEnable"] == "false"


def test_header_json_numeric_strings_and_language_forms() -> None:
    """Numeric strings decode; language may be an ordinal; an unknown name is 'no language'."""
    cmd = header_json.decode_header(b'{"code":"105","language":9,"opaque":"3","flag":"0"}')
    assert (cmd.code, cmd.language, cmd.opaque, cmd.version) == (105, 9, 3, 0)
    unknown = header_json.decode_header(b'{"code":1,"language":"KOTLIN","extFields":null}')
    assert unknown.language == header_json.UNKNOWN_LANGUAGE
    assert unknown.ext_fields is None


def test_header_json_emits_string_ext_values_only() -> None:
    """Every extFields value we emit is a JSON string (Go and C++ readers need that)."""
    out = header_json.encode_header(RemotingCommand(code=0, ext_fields={"queueId": "3"}))
    assert b'"queueId":"3"' in out


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[1,2]", b'{"flag":1}', b'{"code":"abc"}', b'{"code":1,"extFields":[1]}'],
)
def test_header_json_malformed_raises_codec_error(raw: bytes) -> None:
    """Malformed JSON headers raise CodecError (the connection is then closed)."""
    with pytest.raises(CodecError):
        header_json.decode_header(raw)


def test_header_rocketmq_empty_strings_read_as_null() -> None:
    """Java quirk: an empty remark and empty ext values decode as null."""
    cmd = RemotingCommand(code=1, remark="", ext_fields={"k": "", "x": "1"})
    decoded = header_rocketmq.decode_header(header_rocketmq.encode_header(cmd))
    assert decoded.remark is None
    assert decoded.ext_fields == {"x": "1"}


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00" * 5,
        struct.pack(">hbhiii", 1, 0, 1, 1, 0, 1000) + b"\x00" * 8,
        struct.pack(">hbhiii", 1, 0, 1, 1, 0, 0) + struct.pack(">i", 100),
        struct.pack(">hbhiii", 1, 0, 1, 1, 0, 0) + struct.pack(">i", 3) + b"\x00\x09ab",
    ],
)
def test_header_rocketmq_truncated_raises_codec_error(raw: bytes) -> None:
    """Lengths that run past the header raise CodecError."""
    with pytest.raises(CodecError):
        header_rocketmq.decode_header(raw)


def test_frame_limits_count_the_prefix() -> None:
    """The largest accepted length value is max - 4, as Netty counts the prefix."""
    limits = FrameLimits(max_frame_bytes=1024)
    assert read_length(struct.pack(">i", 1020), limits) == 1020
    with pytest.raises(FrameTooLarge):
        read_length(struct.pack(">i", 1021), limits)
    with pytest.raises(CodecError):
        read_length(struct.pack(">i", 3), limits)


def test_frame_bad_header_length_and_type() -> None:
    """A header length beyond the frame, or an unknown serialize type, raises CodecError."""
    with pytest.raises(CodecError, match="bad header length"):
        decode_frame(struct.pack(">I", 50) + b"{}")
    with pytest.raises(CodecError, match="unknown serialize type"):
        decode_frame(struct.pack(">I", (7 << 24) | 2) + b"{}")


@given(st.binary(max_size=200))
def test_frame_decode_random_bytes_never_crashes(data: bytes) -> None:
    """Arbitrary bytes either decode or raise CodecError, nothing else."""
    with contextlib.suppress(CodecError):
        decode_frame(data)


@pytest.mark.parametrize("field", ["code", "opaque", "flag", "version"])
@pytest.mark.parametrize("value", [2**31, 2**63, -(2**31) - 1])
def test_json_header_integers_beyond_java_int_are_refused(field: str, value: int) -> None:
    """1. A JSON header whose <field> is <value> (beyond Java's int). Expected: CodecError
    naming the value (Java's fastjson refuses such a header too); never echoed back in a
    response whose encoding would then fail."""
    header = {"code": 105, "opaque": 1, "flag": 0, "version": 1, field: value}
    with pytest.raises(CodecError, match=f"{field}={value}"):
        header_json.decode_header(json.dumps(header).encode())


def test_decoded_command_sets_every_field() -> None:
    """RemotingCommand.decoded (the header decoders' constructor, no keyword call) builds what
    the keyword constructor builds: every dataclass field set, body None, serialize type 0 (a
    field added to RemotingCommand but not to decoded() fails here)."""
    ext = {"a": "1"}
    got = RemotingCommand.decoded(310, 0, 479, -5, 2, "r", ext)
    want = RemotingCommand(
        code=310, language=0, version=479, opaque=-5, flag=2, remark="r", ext_fields=ext
    )
    for field in dataclasses.fields(RemotingCommand):
        assert getattr(got, field.name) == getattr(want, field.name), field.name


@given(st.lists(st.tuples(commands(binary=True), st.booleans()), min_size=1, max_size=4))
def test_frames_decode_in_place_from_a_receive_buffer(
    cmds: list[tuple[RemotingCommand, bool]],
) -> None:
    """Several frames of both encodings back to back in one bytearray, as a connection receives
    them. Expected: each length read at its offset and each frame decoded in place equal the
    decode of the frame's own copy, bodies as bytes."""
    frames = [
        encode_frame(c, SerializeType.ROCKETMQ if binary else SerializeType.JSON)
        for c, binary in cmds
    ]
    buf = bytearray(b"".join(frames))
    pos = 0
    for frame in frames:
        length = read_length(buf, FrameLimits(), pos)
        assert length == len(frame) - 4
        got = decode_frame_in(buf, pos + 4, pos + 4 + length)
        assert got == decode_frame(frame[4:])
        assert got.body is None or type(got.body) is bytes
        pos += 4 + length
