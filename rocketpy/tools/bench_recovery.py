"""``make bench-recovery``: how long a broker takes to come back, at the sizes operators store.

Owns: one NameServer and one broker (default 1 GiB CommitLog segments) as child processes, filled
in steps to each target size with batch sends of 1 KiB messages; after each step the broker is
restarted after SIGTERM, after SIGKILL under load, and after an emulated crash of the machine
(SIGKILL, then ``abort`` without the kernel boot id: the page cache is not trusted). Each restart
prints the boot time (spawn to boot line), the MB its CommitLog recovery scanned and at what
rate (from the broker's own "commit log recovered" log line), its peak RSS at boot (``VmHWM``)
and whether every acknowledged message is still there; beside it, in the same run, a bare
sequential read of the same CommitLog files (the disk and page-cache rate a scan could reach).
Must not: be used as a test, or import daemon packages (it drives the broker as an operator).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.client.message import Message, SendStatus
from rocketpy.client.producer import Producer
from rocketpy.tools.children import BROKER_BOOT, NAMESRV_BOOT, Child, spawn, stop

TOPIC = "BenchRecovery"
QUEUES = 8
GIB = 1024**3
MB = 1024 * 1024
#: A broker that has not booted within this long failed the run (the aim is 10 s).
BOOT_DEADLINE_S = 600.0
READ_CHUNK = 8 * MB


@dataclass(frozen=True, slots=True)
class Restart:
    """One measured restart."""

    stored_bytes: int
    how: str
    boot_s: float
    scanned_bytes: int
    recovery_ms: float
    peak_rss_mb: float
    acked: int
    found: int


class Load:
    """Batch sends of ``size``-byte bodies with ``inflight`` batches outstanding."""

    def __init__(self, namesrv: str, size: int, batch: int, inflight: int) -> None:
        self.producer = Producer("bench_recovery_pg", namesrv)
        self.body = b"r" * size
        self.batch = batch
        self.inflight = inflight
        self.acked = 0
        self.failed = 0
        self.last_offset = 0

    async def run(self, until: asyncio.Event, upto: int | None = None) -> None:
        """Send until ``until`` is set, or the commit log passes ``upto`` bytes."""

        async def one() -> None:
            while not until.is_set():
                msgs = [Message(topic=TOPIC, body=self.body) for _ in range(self.batch)]
                try:
                    result = await self.producer.send_batch(msgs, timeout_s=5)
                except Exception:  # noqa: BLE001 - a killed broker fails sends; counted
                    self.failed += 1
                    await asyncio.sleep(0.05)
                    continue
                if result.status is SendStatus.SEND_OK:
                    self.acked += self.batch
                    self.last_offset = max(self.last_offset, _phy_offset(result.offset_msg_id))
                    if upto is not None and self.last_offset >= upto:
                        until.set()

        await asyncio.gather(*(one() for _ in range(self.inflight)))


def _phy_offset(offset_msg_id: str | None) -> int:
    """The commit-log offset an offset message id carries (its last 16 hex digits)."""
    return int(offset_msg_id[-16:], 16) if offset_msg_id else 0


def _broker_conf(work: Path) -> Path:
    conf = work / "broker.conf"
    conf.write_text(
        "brokerIP1=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort=0\n"
        f"storePathRootDir={work / 'store'}\nflushDiskType=ASYNC_FLUSH\n"
        "autoCreateTopicEnable=true\n",
        encoding="utf-8",
    )
    return conf


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _recovered_line(log_file: Path) -> dict[str, object]:
    """The last "commit log recovered" JSON log line of the broker."""
    found: dict[str, object] = {}
    with log_file.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if "commit log recovered" in line:
                try:
                    found = json.loads(line)
                except ValueError:
                    continue
    return found


class Bench:
    """The daemons and the run's state."""

    def __init__(self, work: Path, args: argparse.Namespace, namesrv: str) -> None:
        self.work = work
        self.args = args
        self.conf = _broker_conf(work)
        self.namesrv = namesrv
        self.acked = 0
        self.boot_s = 0.0
        self.broker = self._start_broker()

    def _start_broker(self) -> Child:
        started = time.monotonic()
        child = spawn(
            ["-m", "rocketpy.cli.broker", "-c", str(self.conf), "-n", self.namesrv],
            BROKER_BOOT,
            self.work,
            "broker",
            timeout_s=BOOT_DEADLINE_S,
        )
        self.boot_s = time.monotonic() - started
        return child

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker.booted}"

    async def fill(self, upto: int) -> Load:
        """Send until the commit log passes ``upto`` bytes."""
        load = Load(self.namesrv, self.args.size, self.args.batch, self.args.inflight)
        await load.producer.start()
        try:
            await load.run(asyncio.Event(), upto)
        finally:
            await load.producer.shutdown()
        self.acked += load.acked
        return load

    async def kill_under_load(self, seconds: float) -> None:
        """Send for ``seconds``, SIGKILL the broker with sends in flight, stop sending."""
        load = Load(self.namesrv, self.args.size, self.args.batch, self.args.inflight)
        await load.producer.start()
        done = asyncio.Event()
        sending = asyncio.create_task(load.run(done))
        try:
            await asyncio.sleep(seconds)
            self.broker.proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(self.broker.proc.wait, 30)
        finally:
            done.set()
            await sending
            await load.producer.shutdown()
        self.acked += load.acked

    async def count(self) -> int:
        admin = AdminClient(self.namesrv)
        try:
            offsets, _ = await admin.topic_stats(self.broker_addr, TOPIC)
            return sum(q.max_offset for q in offsets.values())
        finally:
            await admin.close()

    async def restart(self, how: str, stored: int) -> Restart:
        """Stop the broker (SIGTERM, or SIGKILL under load), start it, measure the boot.

        ``machine``: SIGKILL under load, then ``abort`` rewritten with the PID alone, as a
        broker that ran under another kernel boot left it: recovery cannot trust the page
        cache and takes upstream's checkpoint rule (what a crash of the machine costs).
        """
        if how == "SIGTERM":
            stop(self.broker)
        else:
            await self.kill_under_load(self.args.load_before_kill)
        if how == "machine":
            (self.work / "store" / "abort").write_text(f"{self.broker.proc.pid}\n")
        self.broker = self._start_broker()
        rss = _peak_rss_mb(self.broker.proc.pid)
        line = _recovered_line(self.work / "logs" / "broker" / "broker.log")
        found = await self.count()
        scanned = int(str(line.get("scanned_bytes", 0)))
        return Restart(stored_bytes=stored, how=how, boot_s=self.boot_s, scanned_bytes=scanned,
                       recovery_ms=float(str(line.get("elapsed_ms", 0))), peak_rss_mb=rss,
                       acked=self.acked, found=found)  # fmt: skip


def bare_read(commit_log: Path, upto: int) -> tuple[int, float]:
    """Read the first ``upto`` bytes of the commit-log segments in order: (bytes, seconds)."""
    total = 0
    started = time.perf_counter()
    for path in sorted(p for p in commit_log.iterdir() if p.name.isdigit()):
        if total >= upto:
            break
        with path.open("rb", buffering=0) as f:
            while total < upto:
                chunk = f.read(min(READ_CHUNK, upto - total))
                if not chunk:
                    break
                total += len(chunk)
    return total, time.perf_counter() - started


async def run(work: Path, args: argparse.Namespace) -> list[tuple[Restart, float]]:
    """Fill to each size, restart after SIGTERM and after SIGKILL; rows with the bare read."""
    ns = spawn(["-m", "rocketpy.cli.namesrv", "-c", str(_namesrv_conf(work))], NAMESRV_BOOT,
               work, "namesrv")  # fmt: skip
    rows: list[tuple[Restart, float]] = []
    bench: Bench | None = None
    try:
        bench = Bench(work, args, f"127.0.0.1:{ns.booted}")
        admin = AdminClient(bench.namesrv)
        try:
            spec = TopicSpec(topic=TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            await admin.create_topic(bench.broker_addr, spec)
        finally:
            await admin.close()
        for gb in args.sizes:
            started = time.monotonic()
            load = await bench.fill(int(gb * GIB))
            stored = load.last_offset
            print(f"filled to {stored / GIB:.2f} GiB in {time.monotonic() - started:.0f} s "
                  f"({bench.acked:,} messages acknowledged)", flush=True)  # fmt: skip
            nbytes, secs = bare_read(work / "store" / "commitlog", stored)
            read_mbps = nbytes / MB / secs if secs else 0.0
            for how in ("SIGTERM", "SIGKILL", *(["machine"] if args.machine else [])):
                row = await bench.restart(how, stored)
                rows.append((row, read_mbps))
                _print_row(row, read_mbps)
    finally:
        if bench is not None:
            stop(bench.broker)
        stop(ns)
    return rows


def _namesrv_conf(work: Path) -> Path:
    conf = work / "namesrv.conf"
    conf.write_text(f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={work / 'kv.json'}\n",
                    encoding="utf-8")  # fmt: skip
    return conf


HEADER = (
    f"{'stored GiB':>10} {'restart':>8} {'boot s':>7} {'scanned MB':>10} {'scan MB/s':>9} "
    f"{'bare read MB/s':>14} {'peak RSS MB':>11} {'acked':>11} {'found':>11}"
)


def _print_row(r: Restart, read_mbps: float) -> None:
    scan_rate = r.scanned_bytes / MB / (r.recovery_ms / 1000) if r.recovery_ms > 0 else 0.0
    print(
        f"{r.stored_bytes / GIB:>10.2f} {r.how:>8} {r.boot_s:>7.2f} {r.scanned_bytes / MB:>10.1f} "
        f"{scan_rate:>9.0f} {read_mbps:>14.0f} {r.peak_rss_mb:>11.1f} {r.acked:>11,} "
        f"{r.found:>11,}{'' if r.found >= r.acked else '  LOST'}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m rocketpy.tools.bench_recovery [--sizes 0.5,2,5] [--dir DIR]``."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.bench_recovery", description=__doc__)
    parser.add_argument("--sizes", default="0.5,2,5",
                        help="GiB stored before each pair of restarts, ascending")  # fmt: skip
    parser.add_argument("-s", "--size", type=int, default=1024, help="body bytes")
    parser.add_argument("-b", "--batch", type=int, default=32, help="messages per batch")
    parser.add_argument("-w", "--inflight", type=int, default=8, help="batches outstanding")
    parser.add_argument("--load-before-kill", type=float, default=3.0,
                        help="seconds of load before the SIGKILL")  # fmt: skip
    parser.add_argument("--dir", default=None, help="parent of the run's throw-away directory")
    parser.add_argument("--no-machine", dest="machine", action="store_false",
                        help="skip the emulated crash of the machine")  # fmt: skip
    args = parser.parse_args(argv)
    args.sizes = [float(x) for x in args.sizes.split(",") if x]
    parent = Path(args.dir) if args.dir else None
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rocketpy-bench-recovery-", dir=parent))
    print(f"bench-recovery: {args.size} B bodies, batches of {args.batch}, {args.inflight} in "
          f"flight, default segment sizes; data under {work}", flush=True)  # fmt: skip
    print(HEADER, flush=True)
    try:
        rows = asyncio.run(run(work, args))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\nsummary (aims: SIGTERM boot < 2 s, SIGKILL boot < 10 s, peak RSS < 150 MB; "
          "machine: a crash of the machine, emulated, for information)")  # fmt: skip
    print(HEADER)
    for row, read_mbps in rows:
        _print_row(row, read_mbps)
    lost = [r for r, _ in rows if r.found < r.acked]
    return 1 if lost else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
