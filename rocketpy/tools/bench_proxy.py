"""``make bench-proxy``: sends and receive+ack through the proxy, both modes, beside remoting.

Owns: the proxy benchmark. Starts as child processes on loopback a NameServer, one broker with
``--enable-proxy`` (Local mode: the proxy inside the broker process), ``mqproxy`` (Cluster mode,
a process of its own over the same broker) and :mod:`rocketpy.tools.grpc_floor` (a grpc.aio
server whose SendMessage does nothing), creates a NORMAL topic, then measures in one run:

1. ``remoting send``: rocketpy's remoting Producer straight to the broker (``--inflight`` sends
   outstanding, ``--size`` bytes);
2. ``cluster send`` / ``local send``: the same load as gRPC SendMessage calls through each proxy;
3. ``grpc floor send``: the same gRPC calls to the do-nothing server (grpc.aio's own cost);
4. ``remoting pop+ack``: rocketpy's remoting SimpleConsumer (POP, batch 32, every message acked);
5. ``cluster/local receive+ack``: gRPC ReceiveMessage (batch 32) + one AckMessage per batch
   through each proxy, ``--consumers`` loops.

Prints msg/s, p50/p99 and CPU microseconds per message (from ``/proc/<pid>/stat``) of the serving
processes (broker, proxy, floor) and of this load-generating process for each phase, and the
proxy/remoting ratio of each pair. The gRPC side uses
rocketpy's generated stubs (what a 5.x client puts on the wire), so the figure is the proxy's,
not a client library's. Must not: be used as a test (numbers vary by machine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import grpc

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.pb import service_pb2_grpc
from rocketpy.tools.bench_pop import run_pop_consumer
from rocketpy.tools.benchmark import run_loop, run_producer
from rocketpy.tools.children import Child, spawn, spawn_namesrv_and_broker, stop
from rocketpy.tools.grpc_floor import BOOT_LINE as FLOOR_LINE
from rocketpy.tools.loadgen import Latencies, Result

PROXY_BOOT: Final = re.compile(r"rocketmq-proxy startup successfully, grpc address \S+:(\d+),")
FLOOR_BOOT: Final = re.compile(
    re.escape(FLOOR_LINE).replace(r"\{host\}", r"\S+").replace(r"\{port\}", r"(\d+)")
)
CLK_TCK: Final = os.sysconf("SC_CLK_TCK")
TOPIC: Final = "ProxyBenchTopic"
CLIENT_META: Final = (("x-mq-client-id", "bench@1@0@proxy"), ("x-mq-language", "PYTHON"))


def _body(size: int) -> bytes:
    return (b"rocketpy-proxy-bench-" * (size // 21 + 1))[:size]


async def _timed(
    label: str, duration_s: float, loops: int, step: Callable[[], Awaitable[int]]
) -> Result:
    """Run ``loops`` copies of ``step`` (returns messages handled) for ``duration_s``."""
    lat = Latencies()
    counts = {"messages": 0, "requests": 0, "failed": 0}
    deadline = time.perf_counter() + duration_s

    async def loop() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                n = await step()
            except (grpc.aio.AioRpcError, OSError, RuntimeError) as e:
                counts["failed"] += 1
                if counts["failed"] == 1:
                    print(f"{label} failed: {e!r}", file=sys.stderr, flush=True)
                await asyncio.sleep(0.05)
                continue
            lat.add((time.perf_counter() - started) * 1e6)
            counts["messages"] += n
            counts["requests"] += 1

    began = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(loops)))
    seconds = time.perf_counter() - began
    return Result(label, counts["requests"], seconds, lat, counts["messages"], counts["failed"])


async def _proxy_send(port: int, size: int, inflight: int, duration_s: float, label: str) -> Result:
    body = _body(size)
    ids = itertools.count()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]

        async def step() -> int:
            msg = pb.Message(
                topic=pb.Resource(name=TOPIC),
                body=body,
                system_properties=pb.SystemProperties(
                    message_id=f"BENCH{next(ids):012d}",
                    message_type=pb.MessageType.NORMAL,
                    born_timestamp={"seconds": int(time.time())},
                ),
            )
            resp = await stub.SendMessage(
                spb.SendMessageRequest(messages=[msg]), metadata=CLIENT_META, timeout=10
            )
            if resp.status.code != pb.Code.OK:
                raise RuntimeError(resp.status.message)
            return 1

        return await _timed(label, duration_s, inflight, step)


async def _proxy_receive(
    port: int, group: str, consumers: int, duration_s: float, label: str
) -> Result:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
        settings = pb.Settings(
            client_type=pb.ClientType.SIMPLE_CONSUMER,
            subscription=pb.Subscription(
                group=pb.Resource(name=group),
                subscriptions=[
                    pb.SubscriptionEntry(
                        topic=pb.Resource(name=TOPIC),
                        expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
                    )
                ],
            ),
        )
        telemetry = stub.Telemetry(metadata=CLIENT_META, timeout=duration_s + 60)
        await telemetry.write(spb.TelemetryCommand(settings=settings))
        await telemetry.read()
        request = spb.ReceiveMessageRequest(
            group=pb.Resource(name=group),
            message_queue=pb.MessageQueue(
                topic=pb.Resource(name=TOPIC), id=-1, broker=pb.Broker(name="broker-a")
            ),
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
            batch_size=32,
            invisible_duration={"seconds": 60},
            long_polling_timeout={"seconds": 5},
        )

        async def step() -> int:
            msgs = [
                r.message
                async for r in stub.ReceiveMessage(request, metadata=CLIENT_META, timeout=10)
                if r.WhichOneof("content") == "message"
            ]
            if not msgs:
                return 0
            ack = spb.AckMessageRequest(
                group=pb.Resource(name=group), topic=pb.Resource(name=TOPIC),
                entries=[
                    spb.AckMessageEntry(
                        message_id=m.system_properties.message_id,
                        receipt_handle=m.system_properties.receipt_handle,
                    )
                    for m in msgs
                ],
            )  # fmt: skip
            resp = await stub.AckMessage(ack, metadata=CLIENT_META, timeout=10)
            if resp.status.code != pb.Code.OK:
                raise RuntimeError(resp.status.message)
            return len(msgs)

        try:
            return await _timed(label, duration_s, consumers, step)
        finally:
            telemetry.cancel()


def _cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` (every thread) in seconds, from ``/proc/<pid>/stat``."""
    text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@dataclasses.dataclass(slots=True)
class Phase:
    """A measured phase and the CPU seconds its serving processes and the load spent."""

    result: Result
    server_cpu_s: float
    load_cpu_s: float

    def cpu_us_per_msg(self, cpu_s: float) -> float:
        """``cpu_s`` per message handled, in microseconds."""
        return cpu_s * 1e6 / max(self.result.messages or self.result.requests, 1)


async def _measured(pids: tuple[int, ...], run: Awaitable[Result]) -> Phase:
    server0, load0 = sum(_cpu_s(p) for p in pids), _cpu_s(os.getpid())
    result = await run
    server = sum(_cpu_s(p) for p in pids) - server0
    return Phase(result, server, _cpu_s(os.getpid()) - load0)


def _line(phase: Phase) -> str:
    result = phase.result
    return (
        f"{result.label:<24} {result.message_rate:>9,.0f} msg/s  p50 "
        f"{result.pct(0.5) / 1000:7.3f} ms  p99 {result.pct(0.99) / 1000:7.3f} ms  "
        f"cpu/msg server {phase.cpu_us_per_msg(phase.server_cpu_s):6.0f} us "
        f"load {phase.cpu_us_per_msg(phase.load_cpu_s):6.0f} us  failed {result.failures}"
    )


@dataclasses.dataclass(slots=True)
class Targets:
    """Where the phases go: addresses, ports and the pids whose CPU each phase is charged."""

    namesrv: str
    broker: str
    broker_pid: int
    cluster_port: int
    cluster_pid: int
    local_port: int
    floor_port: int
    floor_pid: int


async def _run(args: argparse.Namespace, t: Targets) -> list[Phase]:
    admin = AdminClient(t.namesrv)
    try:
        spec = TopicSpec(
            topic=TOPIC, read_queue_nums=4, write_queue_nums=4, attributes="+message.type=NORMAL"
        )
        await admin.create_topic(t.broker, spec)
    finally:
        await admin.close()
    await asyncio.sleep(2.0)  # the broker registers the topic with the NameServer
    d, size, w, c = args.duration, args.size, args.inflight, args.consumers
    broker, cluster = (t.broker_pid,), (t.broker_pid, t.cluster_pid)
    phases = [
        await _measured(broker, run_producer(
            t.namesrv, TOPIC, size=size, inflight=w, duration_s=d, report_interval_s=d + 1,
            label="remoting send",
        )),
        await _measured(cluster, _proxy_send(t.cluster_port, size, w, d, "cluster proxy send")),
        await _measured(broker, _proxy_send(t.local_port, size, w, d, "local proxy send")),
        await _measured((t.floor_pid,), _proxy_send(t.floor_port, size, w, d, "grpc floor send")),
        await _measured(broker, run_pop_consumer(
            t.namesrv, TOPIC, "bench_pop_remoting", duration_s=d, inflight=c,
            report_interval_s=d + 1, label="remoting pop+ack",
        )),
        await _measured(cluster, _proxy_receive(
            t.cluster_port, "bench_pop_cluster", c, d, "cluster receive+ack"
        )),
        await _measured(broker, _proxy_receive(
            t.local_port, "bench_pop_local", c, d, "local receive+ack"
        )),
    ]  # fmt: skip
    return phases


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rocketpy.tools.bench_proxy", description=__doc__)
    p.add_argument("-s", "--size", type=int, default=128, help="body bytes")
    p.add_argument("-w", "--inflight", type=int, default=32, help="sends outstanding")
    p.add_argument("-c", "--consumers", type=int, default=4, help="receive loops")
    p.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per phase")
    p.add_argument("--json", action="store_true", help="also print one JSON line")
    return p


def _wait_line(path: Path, pattern: re.Pattern[str], timeout_s: float = 20.0) -> str:
    """The first group of ``pattern`` once it appears in ``path`` (a child's stdout)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        match = pattern.search(path.read_text(encoding="utf-8", errors="replace"))
        if match:
            return match.group(1)
        time.sleep(0.05)
    raise RuntimeError(f"no {pattern.pattern!r} in {path}")


def _start(workdir: Path, children: list[Child]) -> Targets:
    """Start namesrv, the broker with its Local proxy, mqproxy and the floor into ``children``."""
    conf = workdir / "rmq-proxy.json"
    conf.write_text(json.dumps({"grpcServerPort": 0, "bindAddress": "127.0.0.1"}), encoding="utf-8")
    children.extend(
        spawn_namesrv_and_broker(
            workdir, "brokerName=broker-a\n", ("--enable-proxy", "-pc", str(conf))
        )
    )
    namesrv = f"127.0.0.1:{children[0].booted}"
    local_port = int(_wait_line(workdir / "broker.out", PROXY_BOOT))
    proxy_args = ["-m", "rocketpy.cli.proxy", "-n", namesrv, "-pc", str(conf)]
    children.append(spawn(proxy_args, PROXY_BOOT, workdir, "proxy"))
    children.append(spawn(["-m", "rocketpy.tools.grpc_floor"], FLOOR_BOOT, workdir, "floor"))
    return Targets(
        namesrv=namesrv, broker=f"127.0.0.1:{children[1].booted}",
        broker_pid=children[1].proc.pid, cluster_port=int(children[2].booted),
        cluster_pid=children[2].proc.pid, local_port=local_port,
        floor_port=int(children[3].booted), floor_pid=children[3].proc.pid,
    )  # fmt: skip


def _ratio(a: Phase, b: Phase) -> float:
    return a.result.message_rate / max(b.result.message_rate, 1e-9)


def main(argv: list[str] | None = None) -> int:
    """Start the daemons, run the phases, print the table and ratios."""
    args = _parser().parse_args(argv)
    phases: list[Phase] = []
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
        workdir = Path(tmp)
        children: list[Child] = []
        try:
            targets = _start(workdir, children)

            async def go() -> None:
                phases.extend(await _run(args, targets))

            run_loop(go)
        finally:
            for child in reversed(children):
                with contextlib.suppress(OSError):
                    stop(child)
    print(f"\nproxy benchmark: {args.size} B bodies, {args.inflight} sends outstanding, "
          f"{args.consumers} receive loops, {args.duration:.0f} s per phase; cpu/msg server = "
          "broker (remoting, local), proxy+broker (cluster), floor process (floor)")  # fmt: skip
    for phase in phases:
        print(_line(phase))
    rsend, csend, lsend, floor, rpop, cpop, lpop = phases
    print(
        f"send: cluster/remoting = {_ratio(csend, rsend):.2f}  local/remoting = "
        f"{_ratio(lsend, rsend):.2f}  floor/remoting = {_ratio(floor, rsend):.2f}\n"
        f"receive+ack: cluster/remoting = {_ratio(cpop, rpop):.2f}  local/remoting = "
        f"{_ratio(lpop, rpop):.2f}"
    )
    if args.json:
        print(json.dumps({p.result.label: round(p.result.message_rate) for p in phases}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
