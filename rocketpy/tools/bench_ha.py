"""``make bench-ha``: what AutoSwitch replication costs a producer, and how long failover takes.

Owns: one run of three phases on loopback, every daemon a child process under a throwaway
directory. (a) Baseline: a NameServer and one plain master broker (ASYNC_FLUSH); the producer
benchmark of ``rocketpy.tools.benchmark`` runs against it. (b) Replicated: a NameServer, three
``mqcontroller`` processes and a three-replica broker-set in controller mode with
``allAckInSyncStateSet=true`` (every SEND_OK waits for all three replicas); once all three are
in the SyncStateSet the same benchmark runs. It prints msg/s, MB/s, p50/p99 for both and the
ratio. (c) Failover: while a producer keeps sending, the master is SIGKILLed; it prints the
time from the kill to the first SEND_OK of a send started after the kill (necessarily from the
new master) and to the new master appearing in the controller's SyncStateSet data
(``getSyncStateSet``). Brokers and controllers run with short liveness timings
(``--broker-timeout-ms``), printed with the figures. Must not: be used as a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import sys
import tempfile
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from rocketpy.client.controller_admin import ControllerAdminClient
from rocketpy.client.message import Message, SendStatus
from rocketpy.client.producer import Producer
from rocketpy.common.aio import wait_until
from rocketpy.common.errors import RocketPyError
from rocketpy.remoting.protocol.bodies.controller import ReplicasInfo
from rocketpy.tools.benchmark import run_producer
from rocketpy.tools.children import BROKER_BOOT, NAMESRV_BOOT, Child, free_ports, spawn, stop
from rocketpy.tools.loadgen import Result

CONTROLLER_BOOT = re.compile(
    r"The Controller Server boot success\. serializeType=\w+, address (\S+)"
)
BROKER_NAME = "broker-a"
TOPIC = "BenchHA"
REPLICAS = 3
SYNC_STATE_TIMEOUT_S = 60.0


def _write(path: Path, keys: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in keys.items()), encoding="utf-8")
    return path


def _broker_keys(store: Path) -> dict[str, str]:
    return {
        "brokerClusterName": "DefaultCluster",
        "brokerName": BROKER_NAME,
        "brokerIP1": "127.0.0.1",
        "bindAddress": "127.0.0.1",
        "listenPort": "0",
        "storePathRootDir": str(store),
        "flushDiskType": "ASYNC_FLUSH",
        "autoCreateTopicEnable": "true",
        "defaultTopicQueueNums": "8",
    }


def _namesrv(work: Path) -> tuple[Child, str]:
    conf = _write(work / "namesrv.conf", {
        "listenPort": "0", "bindAddress": "127.0.0.1", "kvConfigPath": str(work / "kv.json"),
        "configStorePath": str(work / "namesrv.properties"),
    })  # fmt: skip
    child = spawn(["-m", "rocketpy.cli.namesrv", "-c", str(conf)], NAMESRV_BOOT, work, "namesrv")
    return child, f"127.0.0.1:{child.booted}"


def _controllers(work: Path, timeout_ms: int) -> list[Child]:
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(free_ports(3)))
    group: list[Child] = []
    try:
        for i in range(3):
            conf = _write(work / f"controller-n{i}.conf", {
                "controllerDLegerGroup": "group1", "controllerDLegerPeers": peers,
                "controllerDLegerSelfId": f"n{i}",
                "controllerStorePath": str(work / f"controller-n{i}"),
                "configStorePath": str(work / f"controller-n{i}" / "controller.properties"),
                "scanNotActiveBrokerInterval": str(max(timeout_ms // 5, 100)),
                "scanInactiveMasterInterval": str(max(timeout_ms // 5, 100)),
                "controllerStartupGraceMs": "0",
            })  # fmt: skip
            args = ["-m", "rocketpy.cli.controller", "-c", str(conf)]
            group.append(spawn(args, CONTROLLER_BOOT, work, f"controller-n{i}"))
    except RuntimeError:
        for child in group:
            stop(child)
        raise
    return group


def _replica(
    work: Path, ns: str, controllers: str, i: int, timeout_ms: int, *, profile: bool
) -> Child:
    keys = _broker_keys(work / f"broker-n{i}")
    keys.update({
        "brokerId": "-1", "brokerRole": "SLAVE", "haListenPort": "0", "namesrvAddr": ns,
        "enableControllerMode": "true", "controllerAddr": controllers,
        "allAckInSyncStateSet": "true", "brokerHeartbeatInterval": str(max(timeout_ms // 8, 50)),
        "controllerHeartBeatTimeoutMills": str(timeout_ms),
        "syncBrokerMetadataPeriod": "500", "checkSyncStateSetPeriod": "500",
        "syncControllerMetadataPeriod": "1000", "haSendHeartbeatInterval": "1000",
    })  # fmt: skip
    conf = _write(work / f"broker-n{i}.conf", keys)
    args = ["-m", "rocketpy.cli.broker", "-c", str(conf)]
    if profile:  # cProfile writes on the clean (SIGTERM) exit
        args = ["-m", "cProfile", "-o", str(work / f"broker-n{i}.prof"), *args]
    return spawn(args, BROKER_BOOT, work, f"broker-n{i}")


async def _sync_state(admin: ControllerAdminClient, controllers: list[str]) -> ReplicasInfo | None:
    for addr in controllers:
        with contextlib.suppress(RocketPyError, OSError, TimeoutError):
            info = await admin.sync_state_data(addr, [BROKER_NAME])
            return info.replicas_info_table.get(BROKER_NAME)
    return None


async def _wait_all_in_sync(controllers: list[str]) -> ReplicasInfo:
    admin = ControllerAdminClient()
    try:
        async with asyncio.timeout(SYNC_STATE_TIMEOUT_S):
            while True:
                info = await _sync_state(admin, controllers)
                if (
                    info is not None
                    and info.master_address
                    and (len(info.in_sync_replicas) == REPLICAS)
                ):
                    return info
                await asyncio.sleep(0.1)
    finally:
        await admin.close()


def _cpu_s(child: Child) -> float:
    """User + system CPU seconds of ``child`` so far (Linux ``/proc/<pid>/stat``)."""
    try:
        stat = Path(f"/proc/{child.proc.pid}/stat").read_text(encoding="ascii")
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # fields from the third (state) on
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure(
    args: argparse.Namespace, ns: str, label: str, procs: dict[str, Child]
) -> Result:
    """Warm up, then run the benchmark; print the CPU each process spent per message sent
    (``procs`` by name, plus this process, the producer)."""
    # Warm up: create the topic, fault in the first mapped pages.
    await run_producer(ns, TOPIC, size=args.size, inflight=8, duration_s=1, report_interval_s=60)
    before = {name: _cpu_s(child) for name, child in procs.items()}
    producer = time.process_time()
    res = await run_producer(ns, TOPIC, size=args.size, inflight=args.inflight,
                             duration_s=args.duration, report_interval_s=args.report_interval,
                             label=label)  # fmt: skip
    spent = {name: _cpu_s(child) - before[name] for name, child in procs.items()}
    spent["producer"] = time.process_time() - producer
    sent = max(res.message_rate * args.duration, 1.0)
    print("  CPU us per message: " + ", ".join(
        f"{name} {cpu * 1e6 / sent:.0f}" for name, cpu in spent.items()), flush=True)  # fmt: skip
    return res


def _line(res: Result, size: int) -> None:
    print(
        f"  {res.label:<52} {res.message_rate:>9,.0f} msg/s {res.message_rate * size / 1e6:7.2f}"
        f" MB/s   p50 {res.pct(0.5) / 1000:7.3f} ms   p99 {res.pct(0.99) / 1000:7.3f} ms"
        f"   failed {res.failures}",
        flush=True,
    )


async def _baseline(args: argparse.Namespace, work: Path) -> Result:
    ns_child, ns = _namesrv(work)
    children = [ns_child]
    try:
        conf = _write(work / "broker.conf", _broker_keys(work / "store"))
        args_ = ["-m", "rocketpy.cli.broker", "-c", str(conf), "-n", ns]
        broker = spawn(args_, BROKER_BOOT, work, "broker")
        children.append(broker)
        print("== (a) one master broker, ASYNC_FLUSH, no replication ==", flush=True)
        return await _measure(args, ns, f"single master ({args.inflight} in flight)",
                              {"master": broker})  # fmt: skip
    finally:
        for child in reversed(children):
            stop(child)


class _Sender:
    """Keeps sending through a producer that refreshes its routes often; records OKs."""

    def __init__(self, ns: str, size: int) -> None:
        # Route refresh every 200 ms: the figure is the cluster's failover, not the client's
        # 30 s route poll (upstream pollNameServerInterval).
        self.producer = Producer("bench_ha_failover", ns, send_timeout_s=1.0,
                                 retry_times_when_send_failed=0,
                                 poll_namesrv_interval_s=0.2)  # fmt: skip
        self.body = b"f" * size
        self.oks: list[tuple[float, float]] = []  # (started, answered), monotonic
        self.failures = 0
        self.stopping = False

    async def loop(self) -> None:
        while not self.stopping:
            started = time.monotonic()
            try:
                result = await self.producer.send(Message(topic=TOPIC, body=self.body))
            except RocketPyError:
                self.failures += 1
                await asyncio.sleep(0.01)
                continue
            if result.status is SendStatus.SEND_OK:
                self.oks.append((started, time.monotonic()))
            else:
                self.failures += 1


async def _failover(controllers: list[str], replicas: dict[str, Child], ns: str) -> None:
    admin = ControllerAdminClient()
    sender = _Sender(ns, 128)
    await sender.producer.start()
    loops = [asyncio.create_task(sender.loop()) for _ in range(8)]
    try:
        info = await _sync_state(admin, controllers)
        old = info.master_address if info else None
        if old not in replicas:
            print(f"  no master to kill (controller says {old})")
            return
        await wait_until(lambda: bool(sender.oks), 10)
        killed = time.monotonic()
        replicas[old].proc.kill()
        sss_s = await _wait_new_master(admin, controllers, old, killed)
        await wait_until(lambda: any(s >= killed for s, _ in sender.oks), SYNC_STATE_TIMEOUT_S)
        first_ok = min(done for started, done in sender.oks if started >= killed) - killed
        print(f"  SIGKILL master {old}: first SEND_OK of a new send after {first_ok:.2f} s; "
              f"new master in getSyncStateSet after {sss_s:.2f} s; "
              f"{sender.failures} sends failed meanwhile", flush=True)  # fmt: skip
    finally:
        sender.stopping = True
        await asyncio.gather(*loops, return_exceptions=True)
        await sender.producer.shutdown()
        await admin.close()


async def _wait_new_master(
    admin: ControllerAdminClient, controllers: list[str], old: str, killed: float
) -> float:
    async with asyncio.timeout(SYNC_STATE_TIMEOUT_S):
        while True:
            info = await _sync_state(admin, controllers)
            if info is not None and info.master_address not in (None, old):
                return time.monotonic() - killed
            await asyncio.sleep(0.02)


async def _replicated(args: argparse.Namespace, work: Path) -> Result:
    ns_child, ns = _namesrv(work)
    children = [ns_child]
    try:
        group = _controllers(work, args.broker_timeout_ms)
        children += group
        ctl_addrs = [c.booted for c in group]
        replicas: dict[str, Child] = {}
        for i in range(REPLICAS):
            child = _replica(work, ns, ";".join(ctl_addrs), i, args.broker_timeout_ms,
                             profile=args.profile)  # fmt: skip
            children.append(child)
            replicas[f"127.0.0.1:{child.booted}"] = child
        info = await _wait_all_in_sync(ctl_addrs)
        print(f"== (b) {REPLICAS} replicas in controller mode, allAckInSyncStateSet=true; master "
              f"{info.master_address}, SyncStateSet of {len(info.in_sync_replicas)} ==",
              flush=True)  # fmt: skip
        procs = {("master" if addr == info.master_address else f"slave {addr}"): child
                 for addr, child in replicas.items()}  # fmt: skip
        procs.update({f"controller-n{i}": c for i, c in enumerate(group)})
        result = await _measure(args, ns, f"3 replicas, all-ack ({args.inflight} in flight)",
                                procs)  # fmt: skip
        if not args.no_failover:
            print(f"== (c) failover (broker heartbeat timeout {args.broker_timeout_ms} ms) ==",
                  flush=True)  # fmt: skip
            await _failover(ctl_addrs, replicas, ns)
        return result
    finally:
        for child in reversed(children):
            stop(child)


async def _main(args: argparse.Namespace, work: Path) -> None:
    """Run (a), then (b) and (c); ``work`` holds ``single/`` and ``replicated/``."""
    base = await _baseline(args, work / "single")
    replicated = await _replicated(args, work / "replicated")
    print(f"\n== rocketpy bench-ha: {args.size} B messages, {args.duration:.0f} s per phase ==")
    _line(base, args.size)
    _line(replicated, args.size)
    ratio = replicated.message_rate / base.message_rate if base.message_rate else 0.0
    print(f"  replicated / single throughput: {ratio:.1%} (aim >= 60%)", flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rocketpy.tools.bench_ha", description=__doc__)
    parser.add_argument("-s", "--size", type=int, default=128, help="body bytes")
    parser.add_argument("-w", "--inflight", type=int, default=64, help="sends outstanding")
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per phase")
    parser.add_argument("--report-interval", type=float, default=5.0)
    parser.add_argument("--broker-timeout-ms", type=int, default=1500,
                        help="controllerHeartBeatTimeoutMills of the brokers")  # fmt: skip
    parser.add_argument("--dir", type=Path, default=None, help="keep the data here")
    parser.add_argument("--no-failover", action="store_true", help="skip phase (c)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run the replicas under cProfile (with --dir: replicated/*.prof)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the three phases; see the module docstring."""
    args = _parser().parse_args(argv)
    if args.dir is not None:
        _run(_main(args, _dirs(args.dir)))
        return 0
    with tempfile.TemporaryDirectory(prefix="rocketpy-bench-ha-") as tmp:
        _run(_main(args, _dirs(Path(tmp))))
    return 0


def _dirs(work: Path) -> Path:
    for sub in ("single", "replicated"):
        (work / sub).mkdir(parents=True)
    return work


def _run(main: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop  # noqa: PLC0415 - optional accelerator, as the benchmark client uses
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


if __name__ == "__main__":
    sys.exit(main())
