"""``make bench-namesrv``: route lookups per second against a NameServer, beside a raw echo ceiling.

Owns: one benchmark run. It starts ``mqnamesrv`` as a child process on a free loopback port (or uses
``--namesrv``), registers one broker with one topic, then drives GET_ROUTEINFO_BY_TOPIC (105) with a
fixed number of requests in flight from a minimal pipelined client. In the same run the same client
sends the same frames to a raw asyncio server that only echoes each frame back (no decoding, no
work): that is the loopback ceiling. Prints lookups/s, p50/p99 latency, the ratio to the ceiling and
the NameServer's idle RSS. Must not: be used as a test (numbers vary by machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import decode_frame, encode_frame

_LEN = struct.Struct(">i")
_OPAQUE = re.compile(rb'"opaque":(-?\d+)')
TOPIC = "BenchRouteTopic"


@dataclass(frozen=True, slots=True)
class Result:
    """One measured phase."""

    label: str
    requests: int
    seconds: float
    latencies_us: list[float]

    @property
    def rate(self) -> float:
        """Requests per second."""
        return self.requests / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        """Latency percentile in microseconds."""
        if not self.latencies_us:
            return 0.0
        ordered = sorted(self.latencies_us)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (length,) = _LEN.unpack(await reader.readexactly(4))
    return await reader.readexactly(length)


async def _drive(
    host: str, port: int, frames: list[bytes], inflight: int, seconds: float
) -> Result:
    """Keep ``inflight`` requests outstanding on one connection for ``seconds``."""
    reader, writer = await asyncio.open_connection(host, port)
    sent_at: dict[bytes, float] = {}
    latencies: list[float] = []
    done = 0
    stop_at = time.perf_counter() + seconds
    index = 0

    def send_one() -> None:
        nonlocal index
        frame = frames[index % len(frames)]
        index += 1
        key = _OPAQUE.search(frame)
        if key is None:
            raise RuntimeError("frame without opaque")
        sent_at[key.group(1)] = time.perf_counter()
        writer.write(frame)

    start = time.perf_counter()
    for _ in range(inflight):
        send_one()
    await writer.drain()
    while sent_at:
        payload = await asyncio.wait_for(_read_frame(reader), 10)
        now = time.perf_counter()
        match = _OPAQUE.search(payload[: 8 + 200])
        if match is None or match.group(1) not in sent_at:
            raise RuntimeError("response with an unknown opaque")
        latencies.append((now - sent_at.pop(match.group(1))) * 1e6)
        done += 1
        if now < stop_at:
            send_one()
            await writer.drain()
    elapsed = time.perf_counter() - start
    writer.close()
    await writer.wait_closed()
    return Result("", done, elapsed, latencies)


class _Echo(asyncio.Protocol):
    """Writes every received byte straight back: no framing, no decoding, no work."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._transport.write(data)


async def _echo_server() -> tuple[asyncio.Server, int]:
    server = await asyncio.get_running_loop().create_server(_Echo, "127.0.0.1", 0)
    port: int = server.sockets[0].getsockname()[1]
    return server, port


def _route_frames(count: int) -> list[bytes]:
    frames = []
    for _ in range(count):
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
        frames.append(encode_frame(cmd))
    return frames


def _register_frame(port: int) -> bytes:
    topic = {
        "order": False,
        "perm": 6,
        "readQueueNums": 8,
        "topicFilterType": "SINGLE_TAG",
        "topicName": TOPIC,
        "topicSysFlag": 0,
        "writeQueueNums": 8,
    }
    version = {"counter": 1, "stateVersion": 0, "timestamp": int(time.time() * 1000)}
    body = json.dumps(
        {
            "filterServerList": [],
            "topicConfigSerializeWrapper": {
                "dataVersion": version,
                # Two topics: a one-topic first registration is refused (namesrv.md 3, step 4).
                "topicConfigTable": {TOPIC: topic, "TBW102": {**topic, "topicName": "TBW102"}},
            },
        },
        separators=(",", ":"),
    ).encode()
    ext = {
        "brokerName": "bench-broker",
        "brokerAddr": f"127.0.0.1:{port}",
        "clusterName": "BenchCluster",
        "haServerAddr": f"127.0.0.1:{port + 1}",
        "brokerId": "0",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    return encode_frame(RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body))


async def _call(
    host: str, port: int, frame: bytes, *, keep_open: bool = False
) -> tuple[RemotingCommand, asyncio.StreamWriter]:
    """One request on a fresh connection; ``keep_open`` keeps a broker's channel registered."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(frame)
        await writer.drain()
        return decode_frame(await asyncio.wait_for(_read_frame(reader), 5)), writer
    finally:
        if not keep_open:
            writer.close()


def _start_namesrv(workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    conf = workdir / "namesrv.conf"
    conf.write_text(f"listenPort=0\nkvConfigPath={workdir / 'kvConfig.json'}\n", encoding="utf-8")
    env = dict(os.environ, ROCKETPY_LOG_DIR=str(workdir / "logs"))
    proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "rocketpy.cli.namesrv", "-c", str(conf)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    if proc.stdout is None:
        raise RuntimeError("no stdout pipe")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode(errors="replace")
        match = re.search(r"address [\d.]+:(\d+)", line)
        if match:
            return proc, int(match.group(1))
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("mqnamesrv did not print its boot line")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _print(res: Result) -> None:
    print(
        f"{res.label:<28} {res.rate:>10,.0f} req/s   p50 {res.pct(0.5):>7.0f} us   "
        f"p99 {res.pct(0.99):>7.0f} us   ({res.requests:,} in {res.seconds:.1f} s)"
    )


async def _bench(args: argparse.Namespace, namesrv_port: int, pid: int | None) -> None:
    reply, broker_channel = await _call(
        "127.0.0.1", namesrv_port, _register_frame(10911), keep_open=True
    )
    if reply.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"register broker failed: {reply.code} {reply.remark}")
    check, _ = await _call("127.0.0.1", namesrv_port, _route_frames(1)[0])
    if check.code != ResponseCode.SUCCESS or not check.body:
        raise RuntimeError(f"route lookup failed: {check.code} {check.remark}")
    frames = _route_frames(4096)
    if pid is not None:
        print(f"NameServer idle RSS: {_rss_mb(pid):.1f} MB (pid {pid})")
    await _drive("127.0.0.1", namesrv_port, frames, args.inflight, 1.0)  # warm-up
    ns = await _drive("127.0.0.1", namesrv_port, frames, args.inflight, args.duration)
    ns = Result("namesrv route lookups", ns.requests, ns.seconds, ns.latencies_us)
    server, echo_port = await _echo_server()
    try:
        await _drive("127.0.0.1", echo_port, frames, args.inflight, 1.0)
        echo = await _drive("127.0.0.1", echo_port, frames, args.inflight, args.duration)
        echo = Result("raw echo ceiling", echo.requests, echo.seconds, echo.latencies_us)
    finally:
        server.close()
        await server.wait_closed()
    print(f"route body {len(check.body)} B, {args.inflight} in flight, one connection")
    _print(ns)
    _print(echo)
    print(f"ratio namesrv / echo ceiling: {ns.rate / echo.rate:.1%}")
    if pid is not None:
        print(f"NameServer RSS after run: {_rss_mb(pid):.1f} MB")
    broker_channel.close()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; see the module docstring."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.bench_namesrv", description=__doc__)
    parser.add_argument("--namesrv", help="host:port of a running NameServer (default: start one)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per phase")
    parser.add_argument("--inflight", type=int, default=64)
    args = parser.parse_args(argv)
    try:
        import uvloop  # noqa: PLC0415 - optional accelerator

        loop_factory = uvloop.new_event_loop
    except ImportError:
        loop_factory = None
    if args.namesrv:
        port = int(args.namesrv.rsplit(":", 1)[1])
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(_bench(args, port, None))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-namesrv-") as tmp:
        proc, port = _start_namesrv(Path(tmp))
        try:
            with asyncio.Runner(loop_factory=loop_factory) as runner:
                runner.run(_bench(args, port, proc.pid))
        finally:
            proc.terminate()
            proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
