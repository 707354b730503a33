"""Producer/consumer benchmarks like upstream's ``producer.sh``/``consumer.sh``.

Owns: the command line ``python -m rocketpy.tools.benchmark
producer|batchproducer|consumer|popconsumer|timer|echo`` and the runners ``make bench``
(:mod:`rocketpy.tools.bench_suite`) drives. ``producer``/``batchproducer`` keep ``--inflight``
sends outstanding with the real :class:`rocketpy.client.Producer` and print every
``--report-interval`` seconds the send TPS, max and average RT, p50/p99 and failures, then a
summary; ``consumer`` push-consumes and prints the consume TPS and born-to-consume latency;
``popconsumer`` POP-consumes and acks (:mod:`rocketpy.tools.bench_pop`); ``timer`` measures how
late timer messages arrive (:mod:`rocketpy.tools.bench_timer`); ``echo`` serves the raw loopback
ceiling.
Must not: be used as a test (numbers vary by machine), or talk to anything but the addresses given.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from rocketpy.client.message import Message, MessageExt, SendStatus
from rocketpy.client.producer import Producer
from rocketpy.client.push_consumer import ConsumeStatus, PushConsumer
from rocketpy.client.route_cache import DEFAULT_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS
from rocketpy.common.codes import RequestCode
from rocketpy.common.message.batch_body import encode_batch_body
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import encode_properties
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import encode_frame
from rocketpy.remoting.protocol.headers.base import ext_encoder
from rocketpy.remoting.protocol.headers.broker import SendMessageRequestHeaderV2
from rocketpy.tools.bench_pop import run_pop_consumer
from rocketpy.tools.bench_timer import run_timer
from rocketpy.tools.loadgen import (
    Latencies,
    Result,
    serve_echo,
)

# -- live statistics ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Window:
    """Counters since the last report."""

    sent: int = 0
    failed: int = 0
    # Counted as they come: a report never sorts or folds a window's worth of samples (a
    # minute at 25k/s took the loop ~1 s, which every send in flight then showed as RT).
    latencies: Latencies = field(default_factory=Latencies)


class SendStats:
    """Aggregates send outcomes; ``report`` prints and resets one interval."""

    def __init__(self, messages_per_send: int) -> None:
        self._per_send = messages_per_send
        self._reasons: set[str] = set()
        self._window = _Window()
        self.total = _Window()  # the whole run: every window merged in
        self._last = time.perf_counter()
        self.started = self._last

    def ok(self, rt_us: float) -> None:
        """One successful send taking ``rt_us``."""
        self._window.sent += self._per_send
        self._window.latencies.add(rt_us)

    def failed(self, why: object) -> None:
        """One failed send; the first reason of each kind is printed once."""
        self._window.failed += 1
        kind = type(why).__name__ if isinstance(why, Exception) else str(why)
        if kind not in self._reasons:
            self._reasons.add(kind)
            print(f"send failed: {why!r}", file=sys.stderr, flush=True)

    def report(self) -> None:
        """Print the interval's line in upstream's shape (plus p50/p99) and start a new one."""
        now = time.perf_counter()
        w, self._window = self._window, _Window()
        span = max(now - self._last, 1e-9)
        self._last = now
        self.total.sent += w.sent
        self.total.failed += w.failed
        lat = w.latencies
        self.total.latencies.merge(lat)
        avg = lat.total / lat.count / 1000 if lat.count else 0.0
        print(
            f"Current Time: {time.strftime('%Y-%m-%d %H:%M:%S')} | Send TPS: {w.sent / span:,.0f}"
            f" | Max RT(ms): {lat.max / 1000:.3f} | Average RT(ms): {avg:7.3f}"
            f" | p50(ms): {lat.pct(0.5) / 1000:.3f} | p99(ms): {lat.pct(0.99) / 1000:.3f}"
            f" | Send Failed: {w.failed}",
            flush=True,
        )

    def summary(self, label: str) -> Result:
        """The whole run as a :class:`Result` (one request per send)."""
        self.report()
        seconds = time.perf_counter() - self.started
        t = self.total
        return Result(label, len(t.latencies), seconds, t.latencies, t.sent, t.failed)


async def _reporter(stats: SendStats, interval_s: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            async with asyncio.timeout(interval_s):
                await stop.wait()
        except TimeoutError:
            stats.report()


# -- producer ----------------------------------------------------------------------------------


def _body(size: int) -> bytes:
    return (b"rocketpy-benchmark-" * (size // 19 + 1))[:size]


async def run_producer(
    namesrv: str,
    topic: str,
    *,
    size: int,
    inflight: int,
    duration_s: float,
    batch: int = 1,
    tags: str | None = None,
    report_interval_s: float = 5.0,
    label: str = "producer",
) -> Result:
    """Send for ``duration_s`` with ``inflight`` sends outstanding; return the whole run."""
    producer = Producer("benchmark_producer", namesrv)
    await producer.start()
    body = _body(size)
    stats = SendStats(batch)
    stop = asyncio.Event()
    deadline = time.perf_counter() + duration_s

    async def send_loop() -> None:
        pause = 0.0  # after a failure: 10 ms, doubling to 500 ms; none after a success
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                if batch > 1:
                    result = await producer.send_batch(
                        [Message(topic=topic, body=body, tags=tags) for _ in range(batch)]
                    )
                else:
                    result = await producer.send(Message(topic=topic, body=body, tags=tags))
            except Exception as e:  # noqa: BLE001 - every failure is counted, the run goes on
                stats.failed(e)
                pause = min(max(pause * 2, 0.01), 0.5)
                await asyncio.sleep(pause)  # back off: a failing broker is not hammered
                continue
            pause = 0.0
            if result.status is SendStatus.SEND_OK:
                stats.ok((time.perf_counter() - started) * 1e6)
            else:
                stats.failed(result.status)

    reporter = asyncio.create_task(_reporter(stats, report_interval_s, stop))
    try:
        await asyncio.gather(*(send_loop() for _ in range(inflight)))
    finally:
        stop.set()
        await reporter
        await producer.shutdown()
    result = stats.summary(label)
    print(
        f"[Complete] Send Total: {result.messages:,} | Send Failed: {result.failures}"
        f" | Send TPS: {result.message_rate:,.0f} | p50(ms): {result.pct(0.5) / 1000:.3f}"
        f" | p99(ms): {result.pct(0.99) / 1000:.3f}",
        flush=True,
    )
    return result


# -- consumer ----------------------------------------------------------------------------------


async def run_consumer(
    namesrv: str,
    topic: str,
    group: str,
    *,
    duration_s: float,
    expect: int | None = None,
    report_interval_s: float = 5.0,
    label: str = "consumer",
) -> Result:
    """Push-consume ``topic`` until ``duration_s`` passed or ``expect`` messages arrived."""

    consumer = PushConsumer(group, namesrv)
    consumer.subscribe(topic, "*")
    # Born-to-consumed in microseconds, counted as they come (as SendStats does): this
    # report's window, and the whole run.
    window = Latencies()
    b2c = Latencies()
    received = 0
    done = asyncio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        nonlocal received
        now_ms = time.time() * 1000
        for m in msgs:
            window.add((now_ms - m.born_timestamp) * 1000)
        received += len(msgs)
        if expect is not None and received >= expect:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer.register_listener(listener)
    started = time.perf_counter()
    last, last_count = started, 0
    await consumer.start()
    try:
        deadline = started + duration_s
        while not done.is_set() and time.perf_counter() < deadline:
            try:
                async with asyncio.timeout(min(report_interval_s, deadline - time.perf_counter())):
                    await done.wait()
            except TimeoutError:
                pass
            now = time.perf_counter()
            lat, window = window, Latencies()
            b2c.merge(lat)
            print(
                f"Current Time: {time.strftime('%Y-%m-%d %H:%M:%S')} | Consume TPS: "
                f"{(received - last_count) / max(now - last, 1e-9):,.0f} | AVG(B2C) RT(ms): "
                f"{lat.total / lat.count / 1000 if lat.count else 0:.3f} | MAX(B2C) RT(ms): "
                f"{lat.max / 1000:.3f}",
                flush=True,
            )
            last, last_count = now, received
    finally:
        await consumer.shutdown()
    seconds = time.perf_counter() - started
    print(
        f"[Complete] consumed {received:,} messages in {seconds:.1f} s | Consume TPS: "
        f"{received / seconds:,.0f}",
        flush=True,
    )
    return Result(label, received, seconds, b2c, received)


# -- raw ceiling -------------------------------------------------------------------------------


def send_frames(topic: str, size: int, count: int, batch: int = 1) -> list[bytes]:
    """``count`` send frames (distinct opaques) as the Java client encodes them: SEND_MESSAGE_V2
    of one ``size``-byte message, or with ``batch`` > 1 SEND_BATCH_MESSAGE of that many, each
    message with its own UNIQ_KEY and WAIT."""
    body = _body(size)
    template = SendMessageRequestHeaderV2(
        a="benchmark_producer", b=topic, c=DEFAULT_TOPIC, d=DEFAULT_TOPIC_QUEUE_NUMS, e=0, f=0,
        g=0, h=0, j=0, k=False, m=batch != 1,
    )  # fmt: skip
    header = ext_encoder(template, ("e", "g", "i"))
    code = RequestCode.SEND_MESSAGE_V2 if batch == 1 else RequestCode.SEND_BATCH_MESSAGE
    frames = []
    for i in range(count):
        props = {MessageConst.UNIQ_KEY: f"{i:032X}", MessageConst.WAIT: "true"}
        payload = body
        if batch != 1:
            payload = encode_batch_body(
                (0, body, encode_properties({**props, MessageConst.UNIQ_KEY: f"{i:024X}{j:08X}"}))
                for j in range(batch)
            )
        ext = header(i % 4, int(time.time() * 1000), encode_properties(props))
        frames.append(encode_frame(RemotingCommand.request(code, ext, payload)))
    return frames


async def _echo_main(port: int) -> None:
    server, bound = await serve_echo("127.0.0.1", port)
    print(f"echo server listening on 127.0.0.1:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    await server.wait_closed()


# -- command line ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rocketpy.tools.benchmark", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("producer", "batchproducer", "consumer", "popconsumer"):
        p = sub.add_parser(name)
        p.add_argument("-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"))
        p.add_argument("-t", "--topic", default="BenchmarkTest")
        add_load_arguments(p, batch=32 if name != "producer" else 1)
    timer = sub.add_parser("timer")
    timer.add_argument("-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"))
    timer.add_argument("-t", "--topic", default="BenchmarkTimer")
    timer.add_argument("-g", "--group", default="benchmark_timer_consumer")
    timer.add_argument("-c", "--count", type=int, default=1000, help="timer messages")
    timer.add_argument("--delay", type=float, default=3.0, help="seconds after each send")
    timer.add_argument("-w", "--inflight", type=int, default=32, help="sends outstanding")
    echo = sub.add_parser("echo")
    echo.add_argument("--port", type=int, default=0)
    return parser


def add_load_arguments(p: argparse.ArgumentParser, *, batch: int) -> None:
    """The load options the producer, consumer and suite commands share."""
    p.add_argument("-s", "--size", type=int, default=128, help="body bytes")
    p.add_argument("-w", "--inflight", "--threads", type=int, default=64, help="sends outstanding")
    p.add_argument("-b", "--batch", type=int, default=batch)
    p.add_argument("--tags", default=None)
    p.add_argument("-g", "--group", default="benchmark_consumer")
    p.add_argument("-d", "--duration", type=float, default=10.0, help="seconds")
    p.add_argument("--report-interval", type=float, default=5.0)


def run_loop(main: Callable[[], Coroutine[Any, Any, object]]) -> None:
    """Run ``main`` on uvloop when installed, else asyncio's loop."""
    try:
        import uvloop  # noqa: PLC0415 - optional accelerator

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark command; see the module docstring."""
    args = _parser().parse_args(argv)
    if args.command == "echo":
        run_loop(lambda: _echo_main(args.port))
    elif args.command == "timer":
        run_loop(
            lambda: run_timer(
                args.namesrv, args.topic, args.group, count=args.count, delay_s=args.delay,
                inflight=args.inflight,
            )
        )  # fmt: skip
    elif args.command in ("producer", "batchproducer"):
        batch = args.batch if args.command == "batchproducer" else 1
        run_loop(
            lambda: run_producer(
                args.namesrv,
                args.topic,
                size=args.size,
                inflight=args.inflight,
                duration_s=args.duration,
                batch=batch,
                tags=args.tags,
                report_interval_s=args.report_interval,
            )
        )
    elif args.command == "popconsumer":
        run_loop(
            lambda: run_pop_consumer(
                args.namesrv,
                args.topic,
                args.group,
                duration_s=args.duration,
                inflight=args.inflight,
                batch=args.batch,
                report_interval_s=args.report_interval,
            )
        )
    else:
        run_loop(
            lambda: run_consumer(
                args.namesrv,
                args.topic,
                args.group,
                duration_s=args.duration,
                report_interval_s=args.report_interval,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
