"""``python -m rocketpy.tools.fuzz``: hostile frames against one daemon port (issue 25, item 6).

Owns: the sending driver. It takes seed-determined sessions from :mod:`rocketpy.tools.fuzz_frames`
and runs them over ``--connections`` concurrent connections (a fresh connection per session; a
daemon closing on bad input is allowed and counted), writes frames in batches with a deadline on
every await, checks what came back (every well-formed request answered with its own opaque,
nothing unasked-for, every fatal frame followed by the daemon closing), keeps ``--idle``
connections open and silent for the whole run, and every ``--probe-interval`` seconds asks a
well-formed control request on a new connection. Prints one summary line (and one JSON line for
scripts); exits 1 when the daemon broke a rule, missed a probe or could not be reached.
Must not: generate frames itself (the generators are pure), or retry a failed check.

``--kind remoting`` speaks remoting frames (``--codes`` picks the NameServer, broker or
controller request codes); ``--kind ha`` speaks to an AutoSwitch master's HA port (ha.md 3).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import struct
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

import orjson

from rocketpy.common.errors import CodecError
from rocketpy.ha.protocol import HandshakeResponse, MasterMessageReader
from rocketpy.tools.fuzz_frames import (
    Expect,
    HAFrames,
    RemotingFrames,
    Session,
    report_before_handshake,
)

CONNECT_S: Final = 5.0
DRAIN_S: Final = 10.0
ANSWER_S: Final = 30.0
CLOSE_S: Final = 10.0
PROBE_S: Final = 5.0
BATCH_FRAMES: Final = 64
_PREFIX: Final = struct.Struct(">iI")
_BINARY: Final = struct.Struct(">hbhii")
_HANDSHAKE_PROBE: Final = struct.Struct(">ihhq").pack(1, 0, 0, 4243)


@dataclass
class Stats:
    """What one run saw. The ``violations`` are the daemon breaking a rule."""

    frames: int = 0
    connections: int = 0
    peer_closes: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    probes_ok: int = 0
    probe_max_s: float = 0.0
    idle_answered: int = 0
    idle_closed: int = 0
    violations: Counter[str] = field(default_factory=Counter)
    #: The frame labels of the first session behind each violation (what to look at first).
    examples: dict[str, str] = field(default_factory=dict)

    def violate(self, what: str, session: Session, count: int = 1) -> None:
        """Count a broken rule and remember the first session that broke it."""
        self.violations[what] += count
        if what not in self.examples:
            labels = Counter(f.label for f in session.frames)
            end = session.terminal.label if session.terminal else "-"
            self.examples[what] = f"{dict(labels)} then {end}"

    def summary(self, target: str, kind: str, elapsed_s: float) -> dict[str, object]:
        """The figures as a flat mapping (the JSON line)."""
        return {"target": target, "kind": kind, "frames": self.frames,
                "connections": self.connections, "peer_closes": self.peer_closes,
                "answers": dict(sorted(self.answers.items())), "probes_ok": self.probes_ok,
                "probe_max_s": round(self.probe_max_s, 3), "idle_answered": self.idle_answered,
                "idle_closed": self.idle_closed, "violations": dict(self.violations),
                "examples": self.examples,
                "elapsed_s": round(elapsed_s, 2),
                "frames_per_s": round(self.frames / elapsed_s) if elapsed_s else 0}  # fmt: skip


class _Replies:
    """What a session still waits for, fed by the reader task."""

    def __init__(self, session: Session, *, ha: bool) -> None:
        answer = [f for f in session.frames if f.expect is Expect.ANSWER]
        # Remoting answers carry the request's opaque; an HA master answers each HANDSHAKE.
        self.waiting = set() if ha else {f.opaque for f in answer}
        self.silent = {f.opaque for f in session.frames if f.expect is Expect.SILENT}
        self.handshakes = len(answer) if ha else 0
        #: Set before the terminal frame goes out: a mutated or truncated frame may still
        #: decode as a request with any opaque, so answers to it cannot be checked.
        self.terminal_sent = False
        self.answered = asyncio.Event()
        self.closed = asyncio.Event()
        self._check()

    def _check(self) -> None:
        if not self.waiting and self.handshakes <= 0:
            self.answered.set()

    def on_remoting(self, code: int, opaque: int, flag: int, stats: Stats) -> None:
        if not flag & 1:
            stats.violations["request-from-daemon"] += 1
        elif opaque in self.waiting:
            self.waiting.discard(opaque)
            stats.answers[str(code)] += 1
        elif opaque in self.silent or self.terminal_sent:
            stats.answers[str(code)] += 1
        else:
            stats.violations["unexpected-opaque"] += 1
        self._check()

    def on_handshake(self, stats: Stats) -> None:
        self.handshakes -= 1
        stats.answers["ha-handshake"] += 1
        self._check()


class Fuzzer:
    """Runs sessions against ``host:port`` until ``frames`` frames are sent."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._host, port = args.target.rsplit(":", 1)
        self._port = int(port)
        self._args = args
        self._ha = args.kind == "ha"
        self._budget = args.frames
        self.stats = Stats()
        gen = HAFrames(args.seed) if self._ha else RemotingFrames(args.seed, args.codes, args.topic)
        self._sessions: Iterator[Session] = gen.sessions()
        self._probe_cmd = _probe_frame(args.probe_code)

    def _take(self) -> Session | None:
        left = self._budget - self.stats.frames
        if left <= 0:
            return None
        session = next(self._sessions)
        if self._ha and self.stats.connections % 50 == 7:
            session = report_before_handshake()
        if len(session) > left:
            session = Session(session.frames[:left], None)
        self.stats.frames += len(session)
        return session

    async def run(self) -> None:
        """Idle connections, workers and the prober, all with deadlines."""
        idle = [await self._connect() for _ in range(self._args.idle)]
        stop = asyncio.Event()
        try:
            async with asyncio.TaskGroup() as tg:
                prober = tg.create_task(self._probe_loop(stop), name="fuzz/probe")
                workers = [tg.create_task(self._worker(), name=f"fuzz/worker-{i}")
                           for i in range(self._args.connections)]  # fmt: skip
                await asyncio.gather(*workers)
                stop.set()
                await prober
            await self._probe()
            for conn in idle:
                if conn is not None:
                    await self._check_idle(*conn)
        finally:
            for conn in idle:
                if conn is not None:
                    conn[1].close()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            async with asyncio.timeout(CONNECT_S):
                return await asyncio.open_connection(self._host, self._port, limit=1 << 20)
        except (OSError, TimeoutError):
            self.stats.violations["connect-failed"] += 1
            return None

    async def _worker(self) -> None:
        while (session := self._take()) is not None:
            conn = await self._connect()
            if conn is None:
                await asyncio.sleep(0.1)
                continue
            self.stats.connections += 1
            await self._run_session(session, *conn)

    async def _run_session(
        self, session: Session, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        replies = _Replies(session, ha=self._ha)
        read = asyncio.create_task(self._read(reader, replies), name="fuzz/read")
        try:
            try:
                await self._write(writer, session)
                async with asyncio.timeout(ANSWER_S):
                    await _first(replies.answered, replies.closed)
            except (OSError, TimeoutError):
                pass
            if replies.closed.is_set():
                if not session.may_close:
                    self.stats.violate("closed-on-well-formed", session)
                return
            if not replies.answered.is_set():
                self.stats.violate("unanswered", session, len(replies.waiting) or 1)
                return
            if session.terminal is not None:
                await self._end(session, writer, replies)
        finally:
            read.cancel()
            writer.close()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await read

    async def _write(self, writer: asyncio.StreamWriter, session: Session) -> None:
        frames = [f.data for f in session.frames]
        if session.drip and frames:
            first = frames.pop(0)
            for i in range(0, len(first), 5):
                writer.write(first[i : i + 5])
                async with asyncio.timeout(DRAIN_S):
                    await writer.drain()
                await asyncio.sleep(0.002)
        for i in range(0, len(frames), BATCH_FRAMES):
            writer.write(b"".join(frames[i : i + BATCH_FRAMES]))
            async with asyncio.timeout(DRAIN_S):
                await writer.drain()

    async def _end(self, session: Session, writer: asyncio.StreamWriter, replies: _Replies) -> None:
        """Send the terminal frame; the daemon must close (at once, or after our EOF)."""
        assert session.terminal is not None  # noqa: S101 - checked by the caller
        data, expect = session.terminal.data, session.terminal.expect
        replies.terminal_sent = True
        try:
            writer.write(data)
            if expect is Expect.EOF and writer.can_write_eof():
                writer.write_eof()
            async with asyncio.timeout(DRAIN_S):
                await writer.drain()
        except OSError:
            pass  # already closed by the daemon: fine, that is what we wait for
        try:
            async with asyncio.timeout(CLOSE_S):
                await replies.closed.wait()
        except TimeoutError:
            self.stats.violate(f"not-closed-{expect.value}", session)

    async def _read(self, reader: asyncio.StreamReader, replies: _Replies) -> None:
        """Count what the daemon sends until it closes (EOF or reset)."""
        buf = bytearray()
        ha = MasterMessageReader() if self._ha else None
        try:
            while data := await reader.read(1 << 16):
                if ha is not None:
                    for msg in ha.feed(data):
                        if isinstance(msg, HandshakeResponse):
                            replies.on_handshake(self.stats)
                        else:
                            self.stats.answers["ha-transfer"] += 1
                    continue
                buf += data
                del buf[: self._parse(buf, replies)]
        except (OSError, CodecError):
            pass
        self.stats.peer_closes += 1
        replies.closed.set()

    def _parse(self, buf: bytearray, replies: _Replies) -> int:
        pos = 0
        while len(buf) - pos >= 8:
            length, word = _PREFIX.unpack_from(buf, pos)
            if len(buf) - pos - 4 < length:
                break
            header = bytes(buf[pos + 8 : pos + 8 + (word & 0xFFFFFF)])
            if word >> 24 == 1:
                code, _, _, opaque, flag = _BINARY.unpack_from(header)
            else:
                obj = orjson.loads(header)
                code, opaque, flag = obj["code"], obj["opaque"], obj.get("flag", 0)
            replies.on_remoting(code, opaque, flag, self.stats)
            pos += 4 + length
        return pos

    async def _probe_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._probe()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._args.probe_interval):
                    await stop.wait()

    async def _probe(self) -> None:
        began = time.monotonic()
        conn = await self._connect()
        if conn is None:
            self.stats.violations["probe-failed"] += 1
            return
        reader, writer = conn
        try:
            async with asyncio.timeout(PROBE_S):
                await self._ask(reader, writer)
            self.stats.probes_ok += 1
            self.stats.probe_max_s = max(self.stats.probe_max_s, time.monotonic() - began)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, CodecError):
            self.stats.violations["probe-failed"] += 1
        finally:
            writer.close()

    async def _ask(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One well-formed request and its answer (HA: a handshake and the master's answer)."""
        if self._ha:
            writer.write(_HANDSHAKE_PROBE)
            ha = MasterMessageReader()
            while not any(
                isinstance(m, HandshakeResponse) for m in ha.feed(await reader.read(4096))
            ):
                if reader.at_eof():
                    raise asyncio.IncompleteReadError(b"", None)
            return
        writer.write(self._probe_cmd)
        length, _ = _PREFIX.unpack(await reader.readexactly(8))
        await reader.readexactly(length - 4)

    async def _check_idle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A connection silent all run: it answers now, or the daemon closed it (idle timeout)."""
        try:
            async with asyncio.timeout(PROBE_S):
                await self._ask(reader, writer)
            self.stats.idle_answered += 1
        except (OSError, asyncio.IncompleteReadError):
            self.stats.idle_closed += 1
        except TimeoutError:
            self.stats.violations["idle-hung"] += 1


async def _first(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


def _probe_frame(code: int) -> bytes:
    header = orjson.dumps({"code": code, "flag": 0, "language": "JAVA", "opaque": 0x7FFFFFFF,
                           "extFields": {"topic": "FuzzProbe", "brokerName": "fuzz-0"},
                           "serializeTypeCurrentRPC": "JSON", "version": 0})  # fmt: skip
    return _PREFIX.pack(4 + len(header), len(header)) + header


def main(argv: list[str] | None = None) -> int:
    """Parse options, run the fuzzer on its own loop, print the summary."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.fuzz", description=__doc__)
    parser.add_argument("--target", required=True, help="host:port of the daemon port")
    parser.add_argument("--kind", choices=("remoting", "ha"), default="remoting")
    parser.add_argument("--codes", choices=("namesrv", "broker", "controller"), default="namesrv",
                        help="remoting: whose request codes to send")  # fmt: skip
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--idle", type=int, default=32, help="connections left silent all run")
    parser.add_argument("--topic", default="FuzzTopic", help="a real topic to aim sends at")
    parser.add_argument("--probe-code", type=int, default=105, help="control request code")
    parser.add_argument("--probe-interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    fuzzer = Fuzzer(args)
    began = time.monotonic()
    try:
        import uvloop  # noqa: PLC0415 - optional accelerator

        loop_factory = uvloop.new_event_loop
    except ImportError:
        loop_factory = None
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(fuzzer.run())
    elapsed = time.monotonic() - began
    kind = "ha" if args.kind == "ha" else f"remoting/{args.codes}"
    summary = fuzzer.stats.summary(args.target, kind, elapsed)
    print("fuzz summary: " + " ".join(f"{k}={v}" for k, v in summary.items()), flush=True)
    print("fuzz-json " + json.dumps(summary), flush=True)
    return 1 if fuzzer.stats.violations else 0


if __name__ == "__main__":
    sys.exit(main())
