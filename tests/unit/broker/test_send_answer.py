"""A stored send's answer from its template is the frame encode_frame writes for its command."""

from __future__ import annotations

import pytest

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.processors.send_answer import SendAnswers
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import decode_frame, encode_frame

UNIQS = [
    "7F0000010A2C18B4AAC2123456780000",  # a Java client's
    "",
    "a,b",  # a batch's, comma-joined
    'q"uote\\back',
    "tab\tnew\nline\x00\x1f",
    "é中文",  # letters outside ASCII: written as they are
    "snow☃man",  # a symbol: escaped or not as orjson does
    "50%off",
]


@pytest.mark.parametrize("uniq", UNIQS)
@pytest.mark.parametrize(
    ("region", "trace"), [("DefaultRegion", True), ('odd "region" 100%\\\n', False)]
)
def test_frame_is_the_commands_encoding(uniq: str, region: str, trace: bool) -> None:
    """1. A config with ``regionId``/``traceOn``. 2. The answer as a command and as a frame for
    the same fields (negative and large opaques, big offsets, every stored code). Expected: the
    frame's bytes are encode_frame(command) exactly, and decode back to the command."""
    config = BrokerConfig.build({"regionId": region, "traceOn": str(trace).lower()})
    answers = SendAnswers()
    for opaque in (1, -7, 2**31 - 1):
        request = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, opaque=opaque)
        for code in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT):
            args = (code, "7F00000100002A9F00000000000004D2", 3, 2**40 + 5, uniq)
            command = answers.command(config, request, *args)
            frame = answers.frame(config, opaque, *args)
            assert frame == encode_frame(command)
            back = decode_frame(frame[4:])
            assert back.ext_fields == command.ext_fields
            assert (back.code, back.opaque, back.flag) == (code, opaque, command.flag)


def test_config_change_rebuilds_the_template() -> None:
    """1. Answer under one config. 2. UPDATE_BROKER_CONFIG swaps the config object. Expected:
    the next answer carries the new region; ext() hands out copies the caller may change."""
    answers = SendAnswers()
    first = BrokerConfig.build({"regionId": "r1"})
    second = BrokerConfig.build({"regionId": "r2", "traceOn": "false"})
    ext = answers.ext(first)
    ext["msgId"] = "x"
    assert answers.ext(first) == {"MSG_REGION": "r1", "TRACE_ON": "true"}
    frame = answers.frame(second, 9, ResponseCode.SUCCESS, "AB", 0, 0, "U")
    decoded = decode_frame(frame[4:]).ext_fields
    assert decoded is not None
    assert (decoded["MSG_REGION"], decoded["TRACE_ON"]) == ("r2", "false")
