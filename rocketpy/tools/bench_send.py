"""``make bench-send``: the broker's send path beside a reference hot path, in one run.

Owns: the command line ``python -m rocketpy.tools.bench_send [--reference PATH]``. It starts a
NameServer and an ASYNC_FLUSH broker as child processes and drives the broker with pre-encoded
SEND_MESSAGE_V2 frames (singles) and SEND_BATCH_MESSAGE frames (batches) kept ``--inflight`` deep
on one connection, then singles at 1 in flight; each phase prints msg/s, MB/s, p50/p99 and the
broker's CPU per message (from ``/proc``, steady even when the machine's speed drifts). With
``--reference`` it runs that script (a minimal broker hot path with its own client, such as the
repository's ``../shared/perf/mini_broker.py``) for singles and batches before and after the
broker phases, and prints each broker figure as a ratio to the mean of the two reference runs.
Must not: import or ship the reference (it is only executed, by path), be used as a test, or talk
to anything but loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rocketpy.client.route_cache import DEFAULT_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS
from rocketpy.common.codes import RequestCode
from rocketpy.common.message.batch_body import encode_batch_body
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import encode_properties
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import encode_frame
from rocketpy.remoting.protocol.headers.base import ext_encoder
from rocketpy.remoting.protocol.headers.broker import SendMessageRequestHeaderV2
from rocketpy.tools.children import spawn_namesrv_and_broker, stop
from rocketpy.tools.loadgen import Latencies, cpu_seconds, rss_mb

_LEN = struct.Struct(">i")
_OPAQUE = re.compile(rb'"opaque":(-?\d+)')
_CODE = re.compile(rb'"code":(-?\d+)')
_REF_LINE = re.compile(r"median=([\d.]+)k msg/s .*server_cpu=([\d.]+)us/msg")


@dataclass(slots=True)
class Figure:
    """One phase: messages per second, server CPU microseconds per message, latencies."""

    label: str
    rate: float
    cpu_us: float
    latencies: Latencies | None = None
    failures: int = 0


class _Pipeline(asyncio.Protocol):
    """Keeps ``inflight`` requests outstanding until ``count`` replies arrived; times each
    reply by its opaque (frames carry distinct ones) and counts non-zero response codes."""

    def __init__(self, frames: list[bytes], count: int, inflight: int) -> None:
        self.frames = frames
        self.keys = [_OPAQUE.search(f, 8).group(1) for f in frames]  # type: ignore[union-attr]
        self.count = count
        self.inflight = inflight
        self.sent = 0
        self.received = 0
        self.failures = 0
        self.sent_at: dict[bytes, float] = {}
        self.latencies = Latencies()
        self.buf = bytearray()
        self.done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.started = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def start(self) -> None:
        self.started = time.perf_counter()
        self._send(min(self.inflight, self.count))

    def _send(self, n: int) -> None:
        assert self.transport is not None  # noqa: S101 - connected before start()
        now = time.perf_counter()
        out = []
        for _ in range(n):
            slot = self.sent % len(self.frames)
            self.sent += 1
            self.sent_at[self.keys[slot]] = now
            out.append(self.frames[slot])
        self.transport.write(b"".join(out))

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        now = time.perf_counter()
        pos, got = 0, 0
        while len(buf) - pos >= 4:
            (total,) = _LEN.unpack_from(buf, pos)
            if len(buf) - pos - 4 < total:
                break
            header_len = _LEN.unpack_from(buf, pos + 4)[0] & 0xFFFFFF
            header = bytes(buf[pos + 8 : pos + 8 + header_len])
            pos += 4 + total
            got += 1
            opaque = _OPAQUE.search(header)
            sent = self.sent_at.pop(opaque.group(1), None) if opaque else None
            if sent is not None:
                self.latencies.add((now - sent) * 1e6)
            code = _CODE.search(header)
            if code is None or code.group(1) != b"0":
                self.failures += 1
        del buf[:pos]
        self.received += got
        if self.received >= self.count:
            if not self.done.done():
                self.done.set_result(now)
            return
        more = min(got, self.count - self.sent)
        if more > 0:
            self._send(more)


def _frames(topic: str, size: int, batch: int, distinct: int) -> list[bytes]:
    """``distinct`` frames (distinct opaques): SEND_MESSAGE_V2 of one ``size``-byte message, or
    SEND_BATCH_MESSAGE of ``batch``, each with a UNIQ_KEY and WAIT as the Java client sends."""
    body = bytes(i % 251 for i in range(size))
    template = SendMessageRequestHeaderV2(
        a="benchmark_producer", b=topic, c=DEFAULT_TOPIC, d=DEFAULT_TOPIC_QUEUE_NUMS, e=0, f=0,
        g=0, h=0, j=0, k=False, m=batch != 1,
    )  # fmt: skip
    header = ext_encoder(template, ("e", "g", "i"))
    code = RequestCode.SEND_MESSAGE_V2 if batch == 1 else RequestCode.SEND_BATCH_MESSAGE
    frames = []
    for i in range(distinct):
        props = {MessageConst.UNIQ_KEY: f"{i:032X}", MessageConst.WAIT: "true"}
        text = encode_properties(props)
        if batch == 1:
            payload = body
        else:
            items = [
                (0, body, encode_properties({**props, MessageConst.UNIQ_KEY: f"{i:024X}{j:08X}"}))
                for j in range(batch)
            ]
            payload = encode_batch_body(items)
        ext = header(i % 4, int(time.time() * 1000), text)
        frames.append(encode_frame(RemotingCommand.request(code, ext, payload)))
    return frames


async def _phase(
    label: str,
    port: int,
    pid: int,
    frames: list[bytes],
    *,
    messages: int,
    batch: int,
    inflight: int,
) -> Figure:
    loop = asyncio.get_running_loop()
    requests = max(1, messages // batch)
    warm = min(requests, 2000)
    _, pipe = await loop.create_connection(
        lambda: _Pipeline(frames, warm, inflight), "127.0.0.1", port
    )
    pipe.start()
    await asyncio.wait_for(pipe.done, 120)
    assert pipe.transport is not None  # noqa: S101 - connected
    pipe.transport.close()
    cpu0 = cpu_seconds(pid)
    _, pipe = await loop.create_connection(
        lambda: _Pipeline(frames, requests, inflight), "127.0.0.1", port
    )
    pipe.start()
    ended = await asyncio.wait_for(pipe.done, 600)
    cpu1 = cpu_seconds(pid)
    assert pipe.transport is not None  # noqa: S101 - connected
    pipe.transport.close()
    n = requests * batch
    return Figure(
        label, n / (ended - pipe.started), (cpu1 - cpu0) * 1e6 / n, pipe.latencies, pipe.failures
    )


def _reference(path: str, batch: int, args: argparse.Namespace) -> Figure:
    """Run the reference script once (it takes the median of its own ``--reps``)."""
    cmd = [
        sys.executable, path, "--codec", "orjson", "--coalesce", "1", "--batch", str(batch),
        "--size", str(args.size), "--inflight", str(args.inflight),
        "--messages", str(args.messages), "--reps", str(args.reps),
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)  # noqa: S603
    match = _REF_LINE.search(out.stdout)
    if match is None:
        raise RuntimeError(f"reference printed no figure: {out.stdout}{out.stderr}")
    label = f"reference {'singles' if batch == 1 else f'batches of {batch}'}"
    return Figure(label, float(match.group(1)) * 1e3, float(match.group(2)))


def _print(fig: Figure, size: int, ref: Figure | None = None) -> None:
    lat = fig.latencies
    pct = (
        f"p50 {lat.pct(0.5) / 1000:6.3f} ms  p99 {lat.pct(0.99) / 1000:6.3f} ms"
        if lat is not None and lat.count
        else " " * 35
    )
    ratio = ""
    if ref is not None:
        ratio = (
            f"  = {fig.rate / ref.rate:5.2f} x reference rate,"
            f" {fig.cpu_us / ref.cpu_us:5.2f} x its CPU"
        )
    print(
        f"  {fig.label:<38} {fig.rate:>9,.0f} msg/s {fig.rate * size / 1e6:7.2f} MB/s  {pct}"
        f"  CPU {fig.cpu_us:6.2f} us/msg  failed {fig.failures}{ratio}",
        flush=True,
    )


def _mean(a: Figure, b: Figure) -> Figure:
    return Figure(a.label, (a.rate + b.rate) / 2, (a.cpu_us + b.cpu_us) / 2)


async def _broker_phases(args: argparse.Namespace, workdir: Path) -> list[Figure]:
    children = spawn_namesrv_and_broker(
        workdir, "flushDiskType=ASYNC_FLUSH\nautoCreateTopicEnable=true\n"
    )
    try:
        broker = children[1]
        pid, port = broker.proc.pid, int(broker.booted)
        await asyncio.sleep(1.0)
        print(f"broker pid {pid}, idle RSS {rss_mb(pid):.1f} MB", flush=True)
        figs = []
        singles = _frames(args.topic, args.size, 1, 4096)
        batches = _frames(args.topic, args.size, args.batch, 512)
        for _ in range(args.reps):
            figs.append(
                await _phase(
                    "broker singles",
                    port,
                    pid,
                    singles,
                    messages=args.messages,
                    batch=1,
                    inflight=args.inflight,
                )
            )
        for _ in range(args.reps):
            figs.append(
                await _phase(
                    f"broker batches of {args.batch}",
                    port,
                    pid,
                    batches,
                    messages=args.messages,
                    batch=args.batch,
                    inflight=args.inflight,
                )
            )
        figs.append(
            await _phase(
                "broker singles, 1 in flight",
                port,
                pid,
                singles,
                messages=min(args.messages, 20_000),
                batch=1,
                inflight=1,
            )
        )
        print(f"broker RSS after the run {rss_mb(pid):.1f} MB", flush=True)
        return figs
    finally:
        for child in reversed(children):
            stop(child)


def _median(figs: list[Figure], label: str) -> Figure:
    same = [f for f in figs if f.label == label]
    mid = sorted(same, key=lambda f: f.rate)[len(same) // 2]
    mid.cpu_us = statistics.median(f.cpu_us for f in same)
    return mid


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.bench_send", description=__doc__)
    parser.add_argument("--reference", default=None, help="path of a reference hot-path script")
    parser.add_argument("-t", "--topic", default="BenchmarkTest")
    parser.add_argument("-s", "--size", type=int, default=128, help="body bytes")
    parser.add_argument("-w", "--inflight", type=int, default=64)
    parser.add_argument("-b", "--batch", type=int, default=32)
    parser.add_argument("--messages", type=int, default=200_000, help="messages per phase")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    print(
        f"send path: {args.size} B bodies, {args.inflight} in flight, {args.messages:,} "
        f"messages per phase, median of {args.reps}",
        flush=True,
    )
    before: list[Figure] = []
    if args.reference:
        before = [_reference(args.reference, 1, args), _reference(args.reference, args.batch, args)]
        for fig in before:
            _print(fig, args.size)
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-send-") as tmp:
        figs = asyncio.run(_broker_phases(args, Path(tmp)))
    refs: dict[int, Figure] = {}
    if args.reference:
        after = [_reference(args.reference, 1, args), _reference(args.reference, args.batch, args)]
        for fig in after:
            _print(fig, args.size)
        refs = {1: _mean(before[0], after[0]), args.batch: _mean(before[1], after[1])}
    singles = _median(figs, "broker singles")
    batches = _median(figs, f"broker batches of {args.batch}")
    print("results (broker medians; ratios to the mean of the reference runs before and after):")
    _print(singles, args.size, refs.get(1))
    _print(batches, args.size, refs.get(args.batch))
    _print(figs[-1], args.size)


if __name__ == "__main__":
    main()
