"""The send benchmark's frames and reference parsing (the figures themselves are not tested)."""

from __future__ import annotations

from rocketpy.common.codes import RequestCode
from rocketpy.common.message.batch_body import decode_batch_body
from rocketpy.remoting.protocol.frame import decode_frame
from rocketpy.tools.bench_send import _REF_LINE
from rocketpy.tools.benchmark import send_frames


def test_single_frames_are_v2_sends_with_distinct_opaques() -> None:
    frames = send_frames("T", 128, 16)
    cmds = [decode_frame(f[4:]) for f in frames]
    assert {c.code for c in cmds} == {RequestCode.SEND_MESSAGE_V2}
    assert len({c.opaque for c in cmds}) == 16
    assert all(len(c.body or b"") == 128 for c in cmds)
    assert all("UNIQ_KEY" in c.ext_fields["i"] for c in cmds)


def test_batch_frames_carry_the_batch() -> None:
    (frame,) = send_frames("T", 64, 1, 32)
    cmd = decode_frame(frame[4:])
    assert cmd.code == RequestCode.SEND_BATCH_MESSAGE
    items = decode_batch_body(cmd.body or b"")
    assert len(items) == 32
    assert len({text for _, _, text in items}) == 32


def test_reference_line_parses() -> None:
    line = (
        "mini_broker impl=plain codec=orjson coalesce=1 batch=1 size=128B messages=300000 "
        "inflight=64 reps=3 median=128.8k msg/s [120.0..130.0k] server_cpu=7.00us/msg (= 143k "
        "msg/s per fully-used core)"
    )
    match = _REF_LINE.search(line)
    assert match is not None
    assert (match.group(1), match.group(2)) == ("128.8", "7.00")
