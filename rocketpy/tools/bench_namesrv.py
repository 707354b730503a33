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
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import decode_frame, encode_frame
from rocketpy.tools.loadgen import Result, drive, read_frame, rss_mb, serve_echo

TOPIC = "BenchRouteTopic"


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
        return decode_frame(await asyncio.wait_for(read_frame(reader), 5)), writer
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
        print(f"NameServer idle RSS: {rss_mb(pid):.1f} MB (pid {pid})")
    await drive("127.0.0.1", namesrv_port, frames, args.inflight, 1.0)  # warm-up
    ns = await drive("127.0.0.1", namesrv_port, frames, args.inflight, args.duration)
    ns = Result("namesrv route lookups", ns.requests, ns.seconds, ns.latencies_us)
    server, echo_port = await serve_echo()
    try:
        await drive("127.0.0.1", echo_port, frames, args.inflight, 1.0)
        echo = await drive("127.0.0.1", echo_port, frames, args.inflight, args.duration)
        echo = Result("raw echo ceiling", echo.requests, echo.seconds, echo.latencies_us)
    finally:
        server.close()
        await server.wait_closed()
    print(f"route body {len(check.body)} B, {args.inflight} in flight, one connection")
    _print(ns)
    _print(echo)
    print(f"ratio namesrv / echo ceiling: {ns.rate / echo.rate:.1%}")
    if pid is not None:
        print(f"NameServer RSS after run: {rss_mb(pid):.1f} MB")
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
