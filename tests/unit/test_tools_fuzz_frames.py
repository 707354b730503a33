"""The fuzz tool's pure generators: the same seed gives the same bytes, and every frame marked
"the daemon must close" is one our own codec refuses (so a daemon that kept such a connection
open would be the daemon's fault, not the generator's)."""

from __future__ import annotations

import itertools

import pytest

from rocketpy.common.errors import CodecError
from rocketpy.ha.protocol import HACodecError, SlaveMessageReader
from rocketpy.remoting.protocol.frame import FrameLimits, decode_frame, read_length
from rocketpy.tools.fuzz_frames import Expect, HAFrames, RemotingFrames, report_before_handshake


@pytest.mark.parametrize("target", ["namesrv", "broker", "controller"])
def test_fuzz_remoting_sessions_repeat_for_a_seed(target: str) -> None:
    """Two generators with one seed yield identical sessions; another seed differs."""
    a = list(itertools.islice(RemotingFrames(5, target, "T").sessions(), 30))
    b = list(itertools.islice(RemotingFrames(5, target, "T").sessions(), 30))
    c = list(itertools.islice(RemotingFrames(6, target, "T").sessions(), 30))
    assert a == b
    assert a != c


def _refused(data: bytes) -> bool:
    limits = FrameLimits()
    try:
        length = read_length(data[:4], limits)
        decode_frame(data[4 : 4 + length])
    except CodecError:
        return True
    return False


def test_fuzz_remoting_close_frames_are_refused_and_good_frames_decode() -> None:
    """1. Take 400 sessions. 2. Decode every frame with the daemon's codec.
    Expected: each CLOSE terminal raises CodecError; each ANSWER/SILENT frame decodes to a
    request (or, for stray responses, a response) with the opaque the driver waits for."""
    closes = 0
    for session in itertools.islice(RemotingFrames(9, "broker", "T").sessions(), 400):
        for frame in session.frames:
            cmd = decode_frame(frame.data[4:])
            assert cmd.opaque == frame.opaque
            assert cmd.is_response == (frame.label == "stray-response")
        if session.terminal is not None and session.terminal.expect is Expect.CLOSE:
            closes += 1
            assert _refused(session.terminal.data), session.terminal
    assert closes > 50


def test_fuzz_ha_close_frames_are_refused() -> None:
    """HA CLOSE terminals after a handshake: a bad state or a negative offset fails the
    master's reader; an ack beyond the master's offset is refused by the master itself (not
    the codec), so it must at least decode as a report."""
    for session in itertools.islice(HAFrames(3).sessions(), 300):
        reader = SlaveMessageReader()
        assert len(reader.feed(b"".join(f.data for f in session.frames))) == len(session.frames)
        terminal = session.terminal
        if terminal is None or terminal.expect is not Expect.CLOSE:
            continue
        if terminal.label == "ha-ack-beyond-max":
            assert reader.feed(terminal.data)
        else:
            with pytest.raises(HACodecError):
                reader.feed(terminal.data)
    assert report_before_handshake().terminal is not None
