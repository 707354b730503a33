"""``make bench-proxy``: sends and receive+ack through ``mqproxy`` beside the broker's remoting.

Owns: the proxy benchmark. Starts a NameServer, one broker and ``mqproxy`` (Cluster mode) as
child processes on loopback, creates a NORMAL topic, then measures in one run:

1. ``remoting send``: rocketpy's remoting Producer straight to the broker (``--inflight`` sends
   outstanding, ``--size`` bytes);
2. ``proxy send``: the same load as gRPC SendMessage calls through the proxy;
3. ``remoting pop+ack``: rocketpy's remoting SimpleConsumer (POP, batch 32, every message acked);
4. ``proxy receive+ack``: gRPC ReceiveMessage (batch 32) + one AckMessage per batch through the
   proxy, ``--consumers`` loops.

Prints msg/s, p50/p99 of each phase and the proxy/remoting ratio of each pair. The gRPC side uses
rocketpy's generated stubs (what a 5.x client puts on the wire), so the figure is the proxy's,
not a client library's. Must not: be used as a test (numbers vary by machine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
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
from rocketpy.tools.loadgen import Latencies, Result

PROXY_BOOT: Final = re.compile(r"rocketmq-proxy startup successfully, grpc address \S+:(\d+),")
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


async def _proxy_send(port: int, size: int, inflight: int, duration_s: float) -> Result:
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

        return await _timed("proxy send", duration_s, inflight, step)


async def _proxy_receive(port: int, group: str, consumers: int, duration_s: float) -> Result:
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
            return await _timed("proxy receive+ack", duration_s, consumers, step)
        finally:
            telemetry.cancel()


def _line(result: Result) -> str:
    return (
        f"{result.label:<20} {result.message_rate:>12,.0f} msg/s  p50 "
        f"{result.pct(0.5) / 1000:8.3f} ms  p99 {result.pct(0.99) / 1000:8.3f} ms  "
        f"failed {result.failures}"
    )


async def _run(args: argparse.Namespace, namesrv: str, broker: str, port: int) -> list[Result]:
    admin = AdminClient(namesrv)
    try:
        spec = TopicSpec(
            topic=TOPIC, read_queue_nums=4, write_queue_nums=4, attributes="+message.type=NORMAL"
        )
        await admin.create_topic(broker, spec)
    finally:
        await admin.close()
    await asyncio.sleep(2.0)  # the broker registers the topic with the NameServer
    d = args.duration
    remote_send = await run_producer(
        namesrv, TOPIC, size=args.size, inflight=args.inflight, duration_s=d,
        report_interval_s=d + 1, label="remoting send",
    )  # fmt: skip
    proxy_send = await _proxy_send(port, args.size, args.inflight, d)
    remote_pop = await run_pop_consumer(
        namesrv, TOPIC, "bench_pop_remoting", duration_s=d, inflight=args.consumers,
        report_interval_s=d + 1, label="remoting pop+ack",
    )  # fmt: skip
    proxy_pop = await _proxy_receive(port, "bench_pop_proxy", args.consumers, d)
    return [remote_send, proxy_send, remote_pop, proxy_pop]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rocketpy.tools.bench_proxy", description=__doc__)
    p.add_argument("-s", "--size", type=int, default=128, help="body bytes")
    p.add_argument("-w", "--inflight", type=int, default=32, help="sends outstanding")
    p.add_argument("-c", "--consumers", type=int, default=4, help="receive loops")
    p.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per phase")
    p.add_argument("--json", action="store_true", help="also print one JSON line")
    return p


def main(argv: list[str] | None = None) -> int:
    """Start the daemons, run the four phases, print the table and ratios."""
    args = _parser().parse_args(argv)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
        workdir = Path(tmp)
        children: list[Child] = spawn_namesrv_and_broker(workdir, "brokerName=broker-a\n")
        try:
            namesrv = f"127.0.0.1:{children[0].booted}"
            broker = f"127.0.0.1:{children[1].booted}"
            conf = workdir / "rmq-proxy.json"
            conf.write_text(
                json.dumps({"grpcServerPort": 0, "bindAddress": "127.0.0.1"}), encoding="utf-8"
            )
            children.append(
                spawn(
                    ["-m", "rocketpy.cli.proxy", "-n", namesrv, "-pc", str(conf)],
                    PROXY_BOOT,
                    workdir,
                    "proxy",
                )
            )
            port = int(children[2].booted)

            async def go() -> None:
                results.extend(await _run(args, namesrv, broker, port))

            run_loop(go)
        finally:
            for child in reversed(children):
                with contextlib.suppress(OSError):
                    stop(child)
    print(f"\nproxy benchmark: {args.size} B bodies, {args.inflight} sends outstanding, "
          f"{args.consumers} receive loops, {args.duration:.0f} s per phase")  # fmt: skip
    for result in results:
        print(_line(result))
    send_ratio = results[1].message_rate / max(results[0].message_rate, 1e-9)
    pop_ratio = results[3].message_rate / max(results[2].message_rate, 1e-9)
    print(
        f"send: proxy/remoting = {send_ratio:.2f}   receive+ack: proxy/remoting = {pop_ratio:.2f}"
    )
    if args.json:
        print(json.dumps({r.label: round(r.message_rate) for r in results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
