"""``make bench-dledger-mode``: producer throughput of a DLedger CommitLog group, batch push off
and on, beside a single ASYNC master and a controller-mode set (issue 22; dledger-commitlog.md
section 5 and check 9).

Owns: one run of four phases on loopback, every daemon a child process under a throwaway
directory, the same producer load (``rocketpy.tools.benchmark.run_producer``) in each. (a) A
NameServer and one ASYNC_FLUSH master. (b) Three replicas in controller mode with
``allAckInSyncStateSet=true`` (``rocketpy.tools.bench_ha``'s set). (c) A NameServer and three
brokers of one DLedger group (``enableDLegerCommitLog``), ``enableBatchPush=false``; (d) the
same with ``enableBatchPush=true``. (c) and (d) measure ``--runs`` times each on one group.
It prints msg/s, p50/p99, failures and the CPU the broker processes spent per message of every
measurement, then the ratios the issue aims at: batch / single push (aim >= 1.45, seed 002
measured 55k -> 80k msg/s) and DLedger / controller-mode set (aim >= 60 %). Must not: be used
as a test (numbers vary by machine); import daemon packages (daemons are driven as an operator
would).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rocketpy.client.admin import AdminClient
from rocketpy.common.errors import RocketPyError
from rocketpy.tools import bench_ha
from rocketpy.tools.benchmark import run_producer
from rocketpy.tools.children import BROKER_BOOT, Child, free_ports, spawn, stop
from rocketpy.tools.loadgen import Result

GROUP = "RaftNode00"
NODES = ("n0", "n1", "n2")
TOPIC = bench_ha.TOPIC
ROLES_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Measured:
    """One measurement: the producer's result and the brokers' CPU microseconds per message."""

    result: Result
    broker_cpu_us: float  # every broker process of the phase together
    leader_cpu_us: float  # the master (leader) alone
    per_broker_us: dict[str, float]  # each broker process, by name


async def measure(
    args: argparse.Namespace, ns: str, label: str, brokers: dict[str, Child], leader: str
) -> Measured:
    """Warm up for 1 s, then send for ``--duration`` s; the CPU ``brokers`` spent meanwhile."""
    await run_producer(ns, TOPIC, size=args.size, inflight=8, duration_s=1, report_interval_s=60)
    before = {name: bench_ha._cpu_s(child) for name, child in brokers.items()}
    res = await run_producer(ns, TOPIC, size=args.size, inflight=args.inflight,
                             duration_s=args.duration, report_interval_s=60,
                             label=label)  # fmt: skip
    spent = {name: bench_ha._cpu_s(child) - before[name] for name, child in brokers.items()}
    sent = max(res.messages or res.requests, 1)
    per = {name: cpu * 1e6 / sent for name, cpu in spent.items()}
    got = Measured(res, sum(per.values()), per[leader], per)
    line(got, args.size)
    print("    CPU us/msg by process: " + ", ".join(
        f"{name}{' (master)' if name == leader else ''} {us:.1f}" for name, us in per.items()),
        flush=True)  # fmt: skip
    return got


def line(m: Measured, size: int) -> None:
    """The figures of one measurement on one line."""
    res = m.result
    print(
        f"  {res.label:<44} {res.message_rate:>9,.0f} msg/s {res.message_rate * size / 1e6:6.2f}"
        f" MB/s  p50 {res.pct(0.5) / 1000:7.3f} ms  p99 {res.pct(0.99) / 1000:7.3f} ms"
        f"  failed {res.failures}  broker CPU/msg {m.broker_cpu_us:.1f} us"
        f" (master {m.leader_cpu_us:.1f} us)",
        flush=True,
    )


async def single_master(args: argparse.Namespace, work: Path) -> Measured:
    """Phase (a): one ASYNC_FLUSH master."""
    ns_child, ns = bench_ha._namesrv(work)
    children = [ns_child]
    try:
        conf = bench_ha._write(work / "broker.conf", bench_ha._broker_keys(work / "store"))
        broker = spawn(["-m", "rocketpy.cli.broker", "-c", str(conf), "-n", ns],
                       BROKER_BOOT, work, "broker")  # fmt: skip
        children.append(broker)
        print("== (a) one master broker, ASYNC_FLUSH ==", flush=True)
        return await measure(args, ns, "single ASYNC master", {"master": broker}, "master")
    finally:
        for child in reversed(children):
            stop(child)


async def controller_set(args: argparse.Namespace, work: Path) -> Measured:
    """Phase (b): three replicas in controller mode, every SEND_OK acknowledged by all three."""
    ns_child, ns = bench_ha._namesrv(work)
    children = [ns_child]
    try:
        group = bench_ha._controllers(work, args.broker_timeout_ms)
        children += group
        ctl = [c.booted for c in group]
        replicas: dict[str, Child] = {}
        for i in range(3):
            child = bench_ha._replica(work, ns, ";".join(ctl), i, args.broker_timeout_ms,
                                      profile=False)  # fmt: skip
            children.append(child)
            replicas[f"127.0.0.1:{child.booted}"] = child
        info = await bench_ha._wait_all_in_sync(ctl)
        print("== (b) 3 replicas in controller mode, allAckInSyncStateSet=true ==", flush=True)
        master = info.master_address or ""
        return await measure(args, ns, "controller-mode set, all-ack", replicas, master)
    finally:
        for child in reversed(children):
            stop(child)


def _dledger_broker(
    work: Path, ns: str, peers: str, node: str, batch: bool, *, profile: bool = False
) -> Child:
    keys = bench_ha._broker_keys(work / node)
    keys.update({
        "brokerClusterName": "RaftCluster", "brokerName": GROUP, "namesrvAddr": ns,
        "enableDLegerCommitLog": "true", "dLegerGroup": GROUP, "dLegerPeers": peers,
        "dLegerSelfId": node, "sendMessageThreadPoolNums": "16",
        "enableBatchPush": str(batch).lower(),
    })  # fmt: skip
    conf = bench_ha._write(work / f"broker-{node}.conf", keys)
    args = ["-m", "rocketpy.cli.broker", "-c", str(conf)]
    if profile:  # cProfile writes on the clean (SIGTERM) exit
        args = ["-m", "cProfile", "-o", str(work / f"broker-{node}.prof"), *args]
    return spawn(args, BROKER_BOOT, work, node)


async def _wait_leader(ns: str, addrs: dict[str, str]) -> str:
    """The node the NameServer lists as brokerId 0, once both others are listed as slaves."""
    admin = AdminClient(ns)
    try:
        async with asyncio.timeout(ROLES_TIMEOUT_S):
            while True:
                try:
                    found = (await admin.cluster_info()).brokers.get(GROUP)
                except RocketPyError:
                    found = None
                listed = dict(found.broker_addrs) if found else {}
                if (
                    len(listed) == 3
                    and 0 in listed  # three listed but none as master: an election under way
                    and set(listed.values()) == set(addrs.values())
                ):
                    return next(n for n, a in addrs.items() if a == listed[0])
                await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def dledger_group(args: argparse.Namespace, work: Path, batch: bool) -> list[Measured]:
    """Phase (c) or (d): one DLedger group, ``--runs`` measurements."""
    ns_child, ns = bench_ha._namesrv(work)
    children = [ns_child]
    try:
        peers = ";".join(f"{n}-127.0.0.1:{p}" for n, p in zip(NODES, free_ports(3), strict=True))
        brokers: dict[str, Child] = {}
        for node in NODES:
            brokers[node] = _dledger_broker(work, ns, peers, node, batch, profile=args.profile)
            children.append(brokers[node])
        began = time.monotonic()
        leader = await _wait_leader(ns, {n: f"127.0.0.1:{c.booted}" for n, c in brokers.items()})
        phase = "(d)" if batch else "(c)"
        print(f"== {phase} DLedger group of 3, enableBatchPush={str(batch).lower()}; leader "
              f"{leader} after {time.monotonic() - began:.1f} s ==", flush=True)  # fmt: skip
        label = f"DLedger 3 replicas, batch push {'on' if batch else 'off'}"
        return [
            await measure(args, ns, f"{label} #{i + 1}", brokers, leader) for i in range(args.runs)
        ]
    finally:
        for child in reversed(children):
            stop(child)


def _mean(ms: list[Measured]) -> float:
    return statistics.fmean(m.result.message_rate for m in ms)


def summary(
    args: argparse.Namespace,
    single: Measured,
    controller: Measured,
    off: list[Measured],
    on: list[Measured],
) -> None:
    """The closing table and the ratios."""
    print(f"\n== rocketpy bench-dledger-mode: {args.size} B messages, {args.inflight} in flight, "
          f"{args.duration:g} s per measurement ==")  # fmt: skip
    for m in (single, controller, *off, *on):
        line(m, args.size)
    off_rate, on_rate = _mean(off), _mean(on)
    for name, ms, rate in (("off", off, off_rate), ("on", on, on_rate)):
        p99 = statistics.median(m.result.pct(0.99) / 1000 for m in ms)
        print(f"  batch push {name}: mean {rate:,.0f} msg/s over {len(ms)} runs, "
              f"median p99 {p99:.3f} ms")  # fmt: skip
    batch = on_rate / off_rate if off_rate else 0.0
    ctl = controller.result.message_rate
    print(f"  batch / single push: {batch:.2f}x (aim >= 1.45)")
    print(f"  DLedger (batch on) / controller-mode set: {on_rate / ctl if ctl else 0.0:.1%} "
          f"(aim >= 60%); batch off: {off_rate / ctl if ctl else 0.0:.1%}")  # fmt: skip
    base = single.result.message_rate
    print(f"  DLedger (batch on) / single ASYNC master: {on_rate / base if base else 0.0:.1%}",
          flush=True)  # fmt: skip


async def _main(args: argparse.Namespace, work: Path) -> None:
    for sub in ("single", "controller", "dledger-off", "dledger-on"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    if args.dledger_only:
        off = await dledger_group(args, work / "dledger-off", batch=False)
        on = await dledger_group(args, work / "dledger-on", batch=True)
        off_rate, on_rate = _mean(off), _mean(on)
        print(f"\n  batch / single push: {on_rate / off_rate if off_rate else 0.0:.2f}x "
              f"(means {on_rate:,.0f} / {off_rate:,.0f} msg/s)", flush=True)  # fmt: skip
        return
    single = await single_master(args, work / "single")
    controller = await controller_set(args, work / "controller")
    off = await dledger_group(args, work / "dledger-off", batch=False)
    on = await dledger_group(args, work / "dledger-on", batch=True)
    summary(args, single, controller, off, on)


def main(argv: list[str] | None = None) -> int:
    """Run the four phases; see the module docstring."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.bench_dledger_mode", description=__doc__)
    parser.add_argument("-s", "--size", type=int, default=128, help="body bytes")
    parser.add_argument("-w", "--inflight", type=int, default=64, help="sends outstanding")
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--runs", type=int, default=3, help="measurements per DLedger phase")
    parser.add_argument(
        "--broker-timeout-ms", type=int, default=1500,
        help="controllerHeartBeatTimeoutMills of the controller-mode set",
    )  # fmt: skip
    parser.add_argument("--dir", type=Path, default=None, help="keep the data here")
    parser.add_argument("--quick", action="store_true", help="1 s runs, 1 per DLedger phase")
    parser.add_argument(
        "--dledger-only", action="store_true",
        help="only phases (c) and (d) and their ratio (for profiling the DLedger group)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", action="store_true",
        help="run the DLedger brokers under cProfile: <dir>/dledger-*/broker-<node>.prof",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.runs = 1.0, 1
    if args.dir is not None:
        bench_ha._run(_main(args, args.dir))
        return 0
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-dledger-mode-") as tmp:
        bench_ha._run(_main(args, Path(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
