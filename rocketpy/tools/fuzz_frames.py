"""Hostile frames for the fuzz tool, generated deterministically from a seed (issue 25, item 6).

Owns: what a fuzz session sends -- a run of well-formed but hostile requests (random and
out-of-range header fields, unknown codes, decompression bombs, SEND_MESSAGE_V2 with fields the
record cannot hold), then optionally one terminal frame that must end the connection (declared
length over 16 MiB, negative length, bad header length or serialize type, header ints beyond
Java's int, garbage, truncation) -- and what the daemon is expected to do with each frame.
Must not: do I/O or keep time (the driver in :mod:`rocketpy.tools.fuzz` sends, reads and times).
The same seed always yields the same sessions, so a failure replays with ``--seed``.

Remoting frames follow remoting.md (the frame layout is in
:mod:`rocketpy.remoting.protocol.frame`); HA frames follow ha.md section 3 (AutoSwitch, 5.1.1+:
``rocketpy.ha.protocol``).
"""

from __future__ import annotations

import enum
import random
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Final

import orjson

from rocketpy.common.codes import RequestCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import DEFAULT_MAX_FRAME_BYTES, SerializeType, encode_frame
from rocketpy.tools.fuzz_fields import FieldMaker

_PREFIX: Final = struct.Struct(">iI")
_LEN: Final = struct.Struct(">i")
_RESPONSE, _ONEWAY = 1, 2
#: JSON header member a terminal frame replaces with an integer Java's int cannot hold.
_HEADER_INTS: Final = ("code", "opaque", "flag", "version")


class Expect(enum.Enum):
    """What the daemon must do with a frame."""

    ANSWER = "answer"  # a response with the frame's opaque, on this connection
    SILENT = "silent"  # nothing, or an answer later (oneway, stray response, held pull)
    CLOSE = "close"  # close the connection without the sender doing anything more
    EOF = "eof"  # anything, then close once the sender half-closes (truncated, garbage)


@dataclass(frozen=True, slots=True)
class Hostile:
    """One frame (remoting) or message (HA) and what must follow it."""

    data: bytes
    expect: Expect
    label: str
    opaque: int = 0  # remoting ANSWER/SILENT frames: the opaque an answer carries
    #: The daemon may close the connection later for a reason of its own: the request made it
    #: a broker's channel, which is closed when that broker expires (upstream
    #: ``scanNotActiveBroker`` -> ``RemotingHelper.closeChannel``).
    may_close: bool = False


@dataclass(frozen=True, slots=True)
class Session:
    """What one connection carries: well-formed frames, then at most one terminal frame.
    ``drip``: write the first frame a few bytes at a time (slow-drip client)."""

    frames: tuple[Hostile, ...]
    terminal: Hostile | None
    drip: bool = False

    @property
    def may_close(self) -> bool:
        """Some frame allows the daemon to close the connection before the session ends."""
        return any(f.may_close for f in self.frames)

    def __len__(self) -> int:
        return len(self.frames) + (self.terminal is not None)


# -- remoting -----------------------------------------------------------------------------------

_KNOWN: Final = frozenset(int(c) for c in RequestCode)
#: Codes of a target that change nothing an operator set up: no config updates, no role or
#: real-broker changes (names come from the fuzz pools in fuzz_fields).
TARGET_CODES: Final[dict[str, tuple[int, ...]]] = {
    "namesrv": (100, 101, 102, 103, 104, 105, 106, 205, 206, 216, 217, 219, 224, 304, 322,
                319, 901, 904),
    "broker": (10, 11, 12, 13, 14, 15, 17, 21, 26, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38,
               41, 42, 43, 200, 202, 207, 208, 214, 215, 310, 320, 321, 351, 352, 361, 400,
               1007, 200050, 200051, 200053),
    "controller": (904, 1001, 1002, 1003, 1004, 1005, 1006, 1010, 1011, 1012, 1013),
}  # fmt: skip
_PULLS: Final = frozenset({11, 361, 200050, 200054, 200055})
#: REGISTER_BROKER, BROKER_HEARTBEAT, CONTROLLER_REGISTER_BROKER: the channel becomes a broker's.
_BROKER_CHANNEL: Final = frozenset({103, 904, 1003})
_FLAG_SUSPEND: Final = 2


class RemotingFrames:
    """Remoting sessions for one target (``namesrv``, ``broker`` or ``controller``)."""

    def __init__(self, seed: int, target: str, topic: str) -> None:
        self._rng = random.Random(seed)
        self._codes = TARGET_CODES[target]
        self._fields = FieldMaker(self._rng, topic)
        self._opaque = 0
        rng = self._rng
        self._good: list[tuple[int, Callable[[], Hostile]]] = [
            # Per mille. A bomb costs the NameServer ~40 ms of inflating up to the frame limit:
            # one in 1,000 frames keeps that a few percent of its time.
            (880, self._known), (90, self._unknown), (20, self._oneway),
            (9, self._stray_response), (1, self._bomb),
        ]  # fmt: skip
        self._terminals: list[tuple[int, Callable[[], Hostile]]] = [
            (3, self._oversized), (2, self._bad_length), (2, self._bad_header_length),
            (2, self._bad_serialize_type), (3, self._bad_json), (3, self._bad_binary),
            (4, self._int_beyond_range), (4, self._truncated), (4, self._garbage),
            (4, self._mutated),
        ]  # fmt: skip
        self._good_cum = _cumulative(self._good)
        self._terminal_cum = _cumulative(self._terminals)
        self._choose = rng.choices

    def sessions(self) -> Iterator[Session]:
        """An endless, seed-determined stream of sessions."""
        rng = self._rng
        while True:
            count = min(int(rng.expovariate(1 / 60)) + 1, 400)
            good = self._good
            frames = tuple(
                f() for (_, f) in self._choose(good, cum_weights=self._good_cum, k=count)
            )
            terminal = None
            if rng.random() < 0.4:
                ((_, make),) = self._choose(self._terminals, cum_weights=self._terminal_cum)
                terminal = make()
            yield Session(frames, terminal, drip=rng.random() < 0.01)

    def _next_opaque(self) -> int:
        self._opaque = (self._opaque + 1) & 0x7FFFFFFF
        return self._opaque

    def _command(self, code: int, flag: int = 0) -> RemotingCommand:
        ext, body = self._fields.request(code)
        return RemotingCommand(code=code, opaque=self._next_opaque(), flag=flag,
                               ext_fields=ext, body=body, remark=self._fields.remark())  # fmt: skip

    def _encode(self, cmd: RemotingCommand) -> bytes:
        # The binary header holds a 16-bit code: wider codes (POP's 200050...) go as JSON.
        binary = self._rng.random() < 0.3 and -32768 <= cmd.code < 32768
        return encode_frame(cmd, SerializeType.ROCKETMQ if binary else SerializeType.JSON)

    def _known(self) -> Hostile:
        cmd = self._command(self._rng.choice(self._codes))
        expect = Expect.ANSWER
        if cmd.code in _PULLS:
            # A pull may be parked until data arrives or its (hostile) suspend timeout passes.
            flag = _as_int((cmd.ext_fields or {}).get("sysFlag", "0"))
            if flag is None or flag & _FLAG_SUSPEND or cmd.code != RequestCode.PULL_MESSAGE:
                expect = Expect.SILENT
        return Hostile(self._encode(cmd), expect, f"code-{cmd.code}", cmd.opaque,
                       may_close=cmd.code in _BROKER_CHANNEL)  # fmt: skip

    def _unknown(self) -> Hostile:
        rng = self._rng
        while (
            code := rng.choice((rng.randrange(-32768, 32768), rng.randrange(1 << 31)))
        ) in _KNOWN:
            pass
        cmd = self._command(code)
        return Hostile(self._encode(cmd), Expect.ANSWER, "unknown-code", cmd.opaque)

    def _oneway(self) -> Hostile:
        cmd = self._command(self._rng.choice(self._codes), flag=_ONEWAY)
        return Hostile(self._encode(cmd), Expect.SILENT, "oneway", cmd.opaque,
                       may_close=cmd.code in _BROKER_CHANNEL)  # fmt: skip

    def _stray_response(self) -> Hostile:
        cmd = self._command(self._rng.choice(self._codes), flag=_RESPONSE)
        return Hostile(self._encode(cmd), Expect.SILENT, "stray-response", cmd.opaque)

    def _bomb(self) -> Hostile:
        """REGISTER_BROKER with compressed=true: a body inflating far past the frame limit,
        or compressed garbage. Only the NameServer serves it; others answer 'not supported'."""
        ext, _ = self._fields.request(RequestCode.REGISTER_BROKER)
        ext = dict(ext or {}, compressed="true")
        body = _bomb_body() if self._rng.random() < 0.5 else self._rng.randbytes(64)
        cmd = RemotingCommand(code=RequestCode.REGISTER_BROKER, opaque=self._next_opaque(),
                              ext_fields=ext, body=body)  # fmt: skip
        return Hostile(encode_frame(cmd), Expect.ANSWER, "register-bomb", cmd.opaque)

    # Terminal frames: each ends the session.

    def _valid_bytes(self) -> bytes:
        return self._encode(self._command(self._rng.choice(self._codes)))

    def _oversized(self) -> Hostile:
        declared = self._rng.choice(
            (DEFAULT_MAX_FRAME_BYTES - 3, DEFAULT_MAX_FRAME_BYTES, 1 << 30, (1 << 31) - 1)
        )
        data = _LEN.pack(declared) + self._rng.randbytes(self._rng.randrange(0, 512))
        return Hostile(data, Expect.CLOSE, "oversized")

    def _bad_length(self) -> Hostile:
        declared = self._rng.choice((-1, -(1 << 31), 0, 1, 3))
        return Hostile(_LEN.pack(declared) + bytes(8), Expect.CLOSE, "bad-length")

    def _bad_header_length(self) -> Hostile:
        size = self._rng.randrange(4, 200)
        word = (self._rng.randrange(2) << 24) | self._rng.randrange(size - 3, 1 << 24)
        data = _PREFIX.pack(size, word) + self._rng.randbytes(size - 4)
        return Hostile(data, Expect.CLOSE, "bad-header-length")

    def _bad_serialize_type(self) -> Hostile:
        header = b'{"code":105,"flag":0,"opaque":1,"version":0}'
        word = (self._rng.randrange(2, 256) << 24) | len(header)
        return Hostile(_PREFIX.pack(4 + len(header), word) + header, Expect.CLOSE, "bad-type")

    def _bad_json(self) -> Hostile:
        header = self._rng.choice((
            b"not json", b"[1,2,3]", b'"code"', b"{}", b'{"code":"abc"}', b'{"code":1.5}',
            b'{"code":true}', b'{"code":105,"extFields":[1]}', b'{"code":105,"opaque":"x"}',
            b"\xff\xfe{", b'{"code":105', self._rng.randbytes(self._rng.randrange(1, 64)),
        ))  # fmt: skip
        return Hostile(_PREFIX.pack(4 + len(header), len(header)) + header, Expect.CLOSE, "json")

    def _bad_binary(self) -> Hostile:
        rng = self._rng
        fixed = struct.pack(">hbhii", 105, 0, 0, 1, 0)
        header = rng.choice((
            fixed[: rng.randrange(len(fixed))],  # shorter than the fixed part
            fixed + _LEN.pack(rng.choice((-1, 1 << 20, 100))),  # remark runs past the end
            fixed + _LEN.pack(0) + _LEN.pack(rng.choice((-5, 1 << 24, 9))) + b"\0",  # ext length
            fixed + _LEN.pack(0) + _LEN.pack(3) + b"\0\x09k",  # key length past the entries
        ))  # fmt: skip
        word = (SerializeType.ROCKETMQ << 24) | len(header)
        return Hostile(_PREFIX.pack(4 + len(header), word) + header, Expect.CLOSE, "binary")

    def _int_beyond_range(self) -> Hostile:
        """A JSON header whose code, opaque, flag or version Java's int cannot hold (opaque
        2**63 and friends): fastjson refuses it, so the daemon closes."""
        big = self._rng.choice((1 << 31, 1 << 63, (1 << 64) + 7, -(1 << 31) - 1, 10**30))
        member = self._rng.choice(_HEADER_INTS)
        obj: dict[str, object] = {"code": 105, "flag": 0, "opaque": 1, "version": 0,
                                  "extFields": {"topic": "T"}}  # fmt: skip
        obj[member] = "@BIG@"
        header = orjson.dumps(obj).replace(b'"@BIG@"', str(big).encode())
        data = _PREFIX.pack(4 + len(header), len(header)) + header
        return Hostile(data, Expect.CLOSE, f"int-range-{member}")

    def _truncated(self) -> Hostile:
        valid = self._valid_bytes()
        return Hostile(valid[: self._rng.randrange(1, len(valid))], Expect.EOF, "truncated")

    def _garbage(self) -> Hostile:
        return Hostile(self._rng.randbytes(self._rng.randrange(1, 600)), Expect.EOF, "garbage")

    def _mutated(self) -> Hostile:
        data = bytearray(self._valid_bytes())
        for _ in range(self._rng.randrange(1, 6)):
            data[self._rng.randrange(len(data))] = self._rng.randrange(256)
        return Hostile(bytes(data), Expect.EOF, "mutated")


# -- HA (AutoSwitch master port) ------------------------------------------------------------------

_HANDSHAKE: Final = struct.Struct(">ihhq")
_REPORT: Final = struct.Struct(">iq")
#: Slave ids no real broker of the campaign uses (real ones are small).
_FUZZ_SLAVE_IDS: Final = (1000, 1001, 4242, (1 << 62))


class HAFrames:
    """Sessions for an AutoSwitch HA master port: a handshake the master must answer, transfer
    reports (acks), then maybe a protocol violation the master must close on."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def sessions(self) -> Iterator[Session]:
        """An endless, seed-determined stream of sessions."""
        rng = self._rng
        while True:
            flags = (rng.randrange(2), rng.randrange(2))
            slave = rng.choice(_FUZZ_SLAVE_IDS)
            hello = Hostile(_HANDSHAKE.pack(1, *flags, slave), Expect.ANSWER, "handshake")
            count = min(int(rng.expovariate(1 / 40)), 300)
            # Acks of offset 0 only: never beyond what the master holds, never asking it to
            # stream much (a report of 0 starts the transfer at the first file).
            report = Hostile(_REPORT.pack(2, 0), Expect.SILENT, "report")
            frames = (hello,) + (report,) * count
            terminal = self._terminal() if rng.random() < 0.6 else None
            yield Session(frames, terminal, drip=rng.random() < 0.01)

    def _terminal(self) -> Hostile:
        rng = self._rng
        choice = rng.randrange(6)
        if choice == 0:
            state = rng.choice((0, 3, 4, 5, -1, 1 << 30))
            return Hostile(struct.pack(">i", state) + bytes(12), Expect.CLOSE, "ha-bad-state")
        if choice == 1:
            offset = rng.choice((-1, -(1 << 63)))
            return Hostile(_REPORT.pack(2, offset), Expect.CLOSE, "ha-negative-offset")
        if choice == 2:
            offset = rng.choice(((1 << 62), (1 << 63) - 1))
            return Hostile(_REPORT.pack(2, offset), Expect.CLOSE, "ha-ack-beyond-max")
        if choice == 3:
            whole = _HANDSHAKE.pack(1, 0, 0, 7)
            return Hostile(whole[: rng.randrange(1, len(whole))], Expect.EOF, "ha-truncated")
        if choice == 4:
            # A 5.0/5.1.0 address handshake: read as a 5.1.1 one, then trailing bytes.
            addr = b"127.0.0.1:1"
            data = struct.pack(">ihhi", 1, 0, 0, len(addr)) + addr
            return Hostile(data, Expect.EOF, "ha-old-handshake")
        return Hostile(rng.randbytes(rng.randrange(1, 200)), Expect.EOF, "ha-garbage")


def report_before_handshake() -> Session:
    """A session that acks without a HANDSHAKE: the master must close (ha.md H-14)."""
    return Session((), Hostile(_REPORT.pack(2, 0), Expect.CLOSE, "ha-report-first"))


# -- helpers ------------------------------------------------------------------------------------


def _cumulative(weighted: list[tuple[int, Callable[[], Hostile]]]) -> list[int]:
    total, out = 0, []
    for weight, _ in weighted:
        total += weight
        out.append(total)
    return out


def _as_int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


@cache
def _bomb_body() -> bytes:
    """zlib of 64 MiB of zeros (about 64 KB): inflates to four times the frame limit."""
    packer = zlib.compressobj(9)
    chunk = bytes(1 << 20)
    return b"".join(packer.compress(chunk) for _ in range(64)) + packer.flush()
