"""``make bench-send-instr``: the send path's CPU work per message counted in instructions, for the
broker and a reference hot path, in one run -- a figure this machine's 2x speed drift does not move.

Owns: the command line ``python -m rocketpy.tools.bench_send_instr [--reference PATH]``. It starts
a NameServer and an ASYNC_FLUSH broker, and the reference script's server (``--role server``, as
``../shared/perf/mini_broker.py`` offers), each server under valgrind's callgrind with counting
off; drives each with the same pre-encoded SEND_MESSAGE_V2 frames (singles) and
SEND_BATCH_MESSAGE frames (batches) kept ``--inflight`` deep on one connection (the frames and
the client of ``make bench-send``); and counts the instructions the server process executed
(every thread: the loop, flushes, the reput) from the first request of a phase to a second after
its last answer (the reput's dispatch of the last records), after a warm-up, less the server's
steady idle rate over as long (its periodic tasks). It prints instructions per message for each
phase (the least of three counts) and the broker's as a ratio to the reference's. A counted
process runs about 50x slower, so phases are a few thousand messages (batches: a few hundred
requests).

Must not: import or ship the reference (it is only executed, by path), be used as a test, or talk
to anything but loopback. Needs ``valgrind`` (with ``callgrind_control`` and ``vgdb``) on PATH.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from rocketpy.tools.benchmark import send_frames
from rocketpy.tools.children import Child, free_ports, spawn, spawn_namesrv_and_broker, stop
from rocketpy.tools.loadgen import pipelined

#: A counted server boots slowly (valgrind translates the interpreter and every import).
BOOT_S = 300.0
#: Counted after a phase's last answer: what it left to do (the reput of the last records).
SETTLE_S = 1.0
#: One-second windows the idle rate is counted in.
IDLE_WINDOWS = 3
#: Counts per phase; the least is reported (noise -- a rare periodic task, a GC pass -- only
#: adds).
REPEATS = 3
T = TypeVar("T")
_TOTALS = re.compile(r"^totals: (\d+)", re.MULTILINE)
_VGDB_PID = re.compile(r"use --pid=(\d+) for (.*)")


@dataclass(slots=True)
class Phase:
    """One measured phase: the label, messages sent and instructions counted."""

    label: str
    messages: int
    instructions: int

    @property
    def per_message(self) -> float:
        """Instructions per message."""
        return self.instructions / self.messages


class Counted:
    """A server process running under callgrind with counting off; :meth:`count` measures."""

    def __init__(self, child: Child, out_file: Path) -> None:
        self.child = child
        self.out_file = out_file
        self.pid = _valgrind_pid(out_file)
        self._dumps = 0

    def _control(self, *args: str) -> None:
        subprocess.run(  # noqa: S603 - valgrind's own tool (checked on PATH), our child's pid
            ["callgrind_control", *args, str(self.pid)],  # noqa: S607
            capture_output=True,
            timeout=120,
            check=True,
        )

    async def idle_rate(self) -> float:
        """Instructions per second the server spends with nothing to do: the least of
        :data:`IDLE_WINDOWS` one-second windows (its steady periodic tasks, which run by the wall
        clock, so a counted phase pays them for as long as it lasts; a window with a rarer task
        in it -- a registration, a stats sample -- is not the steady rate)."""
        rates = []
        for _ in range(IDLE_WINDOWS):
            started = time.monotonic()
            instructions, _ = await self._counted(asyncio.sleep(1.0))
            rates.append(instructions / (time.monotonic() - started))
        return min(rates)

    async def count(
        self,
        port: int,
        frames: list[bytes],
        requests: int,
        *,
        inflight: int,
        batch: int,
        label: str,
        idle_rate: float,
    ) -> Phase:
        """Warm up, then count the instructions of ``requests`` requests and of what they leave
        to do (:data:`SETTLE_S`), less the idle rate over that time."""
        await pipelined("127.0.0.1", port, frames, min(requests, 500), inflight)
        started = time.monotonic()
        instructions, failures = await self._counted(self._load(port, frames, requests, inflight))
        elapsed = time.monotonic() - started
        if failures:
            raise RuntimeError(f"{label}: {failures} sends failed")
        return Phase(label, requests * batch, int(instructions - idle_rate * elapsed))

    @staticmethod
    async def _load(port: int, frames: list[bytes], requests: int, inflight: int) -> int:
        res = await pipelined("127.0.0.1", port, frames, requests, inflight)
        await asyncio.sleep(SETTLE_S)  # the reput's dispatch of the last records
        return res.failures

    async def _counted(self, work: Awaitable[T]) -> tuple[int, T]:
        self._control("--zero")
        self._control("--instr=on")
        try:
            value = await work
        finally:
            self._control("--instr=off")
            self._control("--dump")
            self._dumps += 1
        return self._read_dump(self._dumps), value

    def _read_dump(self, number: int) -> int:
        path = self.out_file.with_name(f"{self.out_file.name}.{number}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists():
                match = _TOTALS.search(path.read_text(encoding="utf-8", errors="replace"))
                if match:
                    return int(match.group(1))
            time.sleep(0.2)
        raise RuntimeError(f"callgrind wrote no dump {path}")


def _valgrind_pid(out_file: Path) -> int:
    """The counted process's pid (the ``valgrind`` command may be a wrapper around it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        listing = subprocess.run(
            ["vgdb", "-l"],  # noqa: S607 - valgrind's own tool, checked on PATH
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
        for pid, cmd in _VGDB_PID.findall(listing):
            if str(out_file) in cmd:
                return int(pid)
        time.sleep(0.2)
    raise RuntimeError(f"no valgrind process writes {out_file}")


def _prefix(out_file: Path) -> list[str]:
    return [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", "--cache-sim=no",
        f"--callgrind-out-file={out_file}",
    ]  # fmt: skip


async def _measure(
    server: Counted, port: int, name: str, args: argparse.Namespace
) -> tuple[Phase, Phase]:
    """Singles then batches on one server, each the least of :data:`REPEATS` counts."""
    singles = send_frames(args.topic, args.size, 2048)
    batches = send_frames(args.topic, args.size, 256, args.batch)
    idle = await server.idle_rate()
    print(f"    {name} idle: {idle / 1e6:,.1f} M instructions/s (taken off each phase)", flush=True)
    out = []
    for frames, requests, batch, shape in (
        (singles, args.messages, 1, "singles"),
        (
            batches,
            max(1, args.batch_messages // args.batch),
            args.batch,
            f"batches of {args.batch}",
        ),
    ):
        label = f"{name} {shape}"
        phases = [
            await server.count(
                port,
                frames,
                requests,
                inflight=args.inflight,
                batch=batch,
                label=label,
                idle_rate=idle,
            )
            for _ in range(REPEATS)
        ]
        out.append(min(phases, key=lambda p: p.per_message))
        for p in phases:
            print(f"    {label}: {p.per_message:,.0f} instructions/msg", flush=True)
    return out[0], out[1]


async def _broker(args: argparse.Namespace, workdir: Path) -> tuple[Phase, Phase]:
    out_file = workdir / "broker.callgrind"
    children = spawn_namesrv_and_broker(
        workdir,
        "flushDiskType=ASYNC_FLUSH\nautoCreateTopicEnable=true\n",
        broker_prefix=_prefix(out_file),
        broker_boot_s=BOOT_S,
    )
    try:
        server = Counted(children[1], out_file)
        return await _measure(server, int(children[1].booted), "broker", args)
    finally:
        for child in reversed(children):
            stop(child)


async def _reference(args: argparse.Namespace, workdir: Path) -> tuple[Phase, Phase]:
    out_file = workdir / "reference.callgrind"
    (port,) = free_ports(1)
    child = spawn(
        [args.reference, "--role", "server", "--port", str(port), "--codec", "orjson",
         "--coalesce", "1"],
        re.compile(r"(READY)"),
        workdir,
        "reference",
        timeout_s=BOOT_S,
        prefix=_prefix(out_file),
    )  # fmt: skip
    try:
        return await _measure(Counted(child, out_file), port, "reference", args)
    finally:
        stop(child)


def _print(phase: Phase, ref: Phase | None) -> None:
    ratio = f"  = {phase.per_message / ref.per_message:5.2f} x the reference" if ref else ""
    print(f"  {phase.label:<28} {phase.per_message:>10,.0f} instructions/msg{ratio}", flush=True)


async def _main(args: argparse.Namespace) -> int:
    for tool in ("valgrind", "callgrind_control", "vgdb"):
        if shutil.which(tool) is None:
            print(f"bench-send-instr needs {tool} on PATH (apt install valgrind)", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-instr-") as tmp:
        workdir = Path(tmp)
        print(
            f"send path in instructions: {args.size} B bodies, {args.inflight} in flight, "
            f"{args.messages:,} singles and {args.batch_messages:,} batched messages per phase "
            "(counted under callgrind)",
            flush=True,
        )
        ref: tuple[Phase, Phase] | None = None
        if args.reference:
            (workdir / "ref").mkdir()
            ref = await _reference(args, workdir / "ref")
        (workdir / "broker").mkdir()
        broker = await _broker(args, workdir / "broker")
        print("results (least of each phase's counts):", flush=True)
        for i, phase in enumerate(broker):
            if ref is not None:
                _print(ref[i], None)
            _print(phase, ref[i] if ref is not None else None)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run the measurement."""
    parser = argparse.ArgumentParser(prog="bench-send-instr", description=__doc__.split("\n")[0])
    parser.add_argument("--reference", help="a reference hot path script (mini_broker.py)")
    parser.add_argument("--messages", type=int, default=4096, help="messages per singles phase")
    parser.add_argument(
        "--batch-messages", type=int, default=16384, help="messages per batches phase"
    )
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--topic", default="BenchTopic")
    return asyncio.run(_main(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
