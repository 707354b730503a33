"""Golden frames from the spec's worked examples: encode == golden and decode(golden) == value."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.common.codes import LanguageCode, RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import SerializeType, decode_frame, encode_frame
from tests.helpers.golden import load_hex

HERE = Path(__file__).parent


ROUTE_REQUEST = RemotingCommand(
    code=RequestCode.GET_ROUTEINFO_BY_TOPIC,
    language=LanguageCode.JAVA,
    version=479,
    opaque=42,
    flag=0,
    ext_fields={"topic": "TopicTest"},
)
SUCCESS_RESPONSE = RemotingCommand(
    code=ResponseCode.SUCCESS, language=LanguageCode.JAVA, version=479, opaque=42, flag=1
)


@pytest.mark.parametrize(
    ("name", "cmd", "serialize_type"),
    [
        ("request_json_topic_route.hex", ROUTE_REQUEST, SerializeType.JSON),
        ("request_rocketmq_topic_route.hex", ROUTE_REQUEST, SerializeType.ROCKETMQ),
        ("response_json_success.hex", SUCCESS_RESPONSE, SerializeType.JSON),
    ],
)
def test_frame_golden(name: str, cmd: RemotingCommand, serialize_type: int) -> None:
    """1. Encode the command. 2. Compare with the golden bytes. 3. Decode the golden bytes back."""
    golden = load_hex(HERE / name)
    assert encode_frame(cmd, serialize_type) == golden
    decoded = decode_frame(golden[4:])
    assert decoded.serialize_type == serialize_type
    decoded.serialize_type = cmd.serialize_type
    assert decoded == cmd
