"""Randomized fault rounds against one DLedger CommitLog group (issue 22; dledger-commitlog.md
section 6 checks 4-6 and 10 under load).

:class:`DLedgerChaosRun` starts mqnamesrv and the three brokers of one DLedger group
(tests/helpers/dledger_brokers.py, upstream's default DLedger timings) as real processes.
Two producers send numbered keys to the NameServer's brokerId 0 all along and record every
attempt (with the time it began) in a :class:`~tests.helpers.history.History`; a consumer pulls
every queue of the current master all along and remembers which key it read at each
(queue, offset). Each round injects one seeded fault (SIGKILL of the leader or of a follower,
SIGSTOP/SIGCONT of either, a kill-restart, all three crashed, both followers killed), heals it
and waits until the NameServer lists a master and both slaves and a producer got a SEND_OK.
With a :class:`~tests.helpers.netlab.NetLab` every daemon runs in a host of its own, so that
tests/helpers/dledger_partition.py can cut links between them.

Checked after every round: the three brokers agree on the committed position and their DLedger
data and index files are byte-identical up to it (producers paused for the check); a new master
acknowledged within FAILOVER_LIMIT_S when a majority lived; no send begun while a majority was
down got SEND_OK. At the end: the history checker (no SEND_OK lost, no phantom, no copy beyond
the attempts, queues in order, no two keys acknowledged at one position), the live consumer's
reads agree with the final read, and the files byte-identical from position 0.

Must not: mock any layer; it reads the DLedger files with tests/helpers/dledger_files.py's
format knowledge only (raw bytes), never with rocketpy's own store code.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import struct
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from rocketpy.client.admin import AdminClient
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import ConnectionClosed, RemotingError
from rocketpy.tools.children import free_ports
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.chaos_cluster import read_queues, stats
from tests.helpers.dledger_brokers import (
    NODES,
    DLedgerGroup,
    create_topic,
    master_addr,
    wait_roles,
)
from tests.helpers.history import History, Outcome, Summary, Violation
from tests.helpers.netlab import NetLab
from tests.helpers.processes import Daemon, start_namesrv

TOPIC = "DLedgerChaos"
QUEUES = 4
PRODUCERS = 2
SEND_TIMEOUT_S = 5.0
RECOVERY_TIMEOUT_S = 60.0
# Default DLedger timings: 2 s heartbeats x 3 missed, then a vote (~8 s); room for a busy host.
FAILOVER_LIMIT_S = 20.0
REPLICA_TIMEOUT_S = 30.0
# 1 MiB data files: a run rolls over many of them.
BROKER_KEYS = "mappedFileSizeCommitLog=1048576\n"
UNIT = 32  # one index unit: magic, pos, size, index, term
#: The DLedger peer port of a member that has a host (a network namespace) to itself.
PEER_PORT = 40911
_UNIT = struct.Struct(">iqiqq")


class Fault(StrEnum):
    """One kind of fault a round injects."""

    KILL_LEADER = "kill-leader"
    KILL_FOLLOWER = "kill-follower"
    PAUSE_LEADER = "pause-leader"  # SIGSTOP until another master acknowledges, then SIGCONT
    PAUSE_FOLLOWER = "pause-follower"
    KILL_RESTART = "kill-restart"  # SIGKILL any member, restart it at once
    RESTART_LEADER = "restart-leader"  # SIGTERM and restart
    CRASH_ALL = "crash-all"
    QUORUM_LOSS = "quorum-loss"  # SIGKILL both followers, hold, restart them


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one round did and how long the group took to get over it."""

    fault: StrEnum  # a Fault, or a partition's cut (tests/helpers/dledger_partition.py)
    victims: tuple[str, ...]
    failover_s: float | None  # fault (or restart, crash-all) -> SEND_OK from another master
    recovery_s: float  # fault -> all three listed again and a SEND_OK after that
    outage_s: float  # the longest stretch without a SEND_OK in the round

    def line(self) -> str:
        """One line for the run's log."""
        failover = "-" if self.failover_s is None else f"{self.failover_s:.2f}s"
        return (
            f"{self.fault} on {','.join(self.victims)}: failover {failover}, no SEND_OK for "
            f"{self.outage_s:.2f}s, recovered in {self.recovery_s:.2f}s"
        )


@dataclass(slots=True)
class DLedgerReport:
    """The outcome of a run."""

    seed: int
    rounds: list[RoundResult] = field(default_factory=list)
    summary: Summary | None = None
    violations: list[Violation] = field(default_factory=list)
    live_reads: int = 0
    checked_bytes: int = 0

    def render(self) -> str:
        """The human summary printed at the end of a run."""
        kinds = Counter(str(r.fault) for r in self.rounds)
        fails = sorted(r.failover_s for r in self.rounds if r.failover_s is not None)
        lines = [
            f"dledger chaos seed={self.seed} rounds={len(self.rounds)}",
            "faults: " + ", ".join(f"{k}={n}" for k, n in sorted(kinds.items())),
        ]
        if self.summary is not None:
            s = self.summary
            lines.append(
                f"sends: ok={s.ok} failed={s.failed} unknown={s.unknown} keys={s.keys} "
                f"consumed={s.consumed} live-consumer reads={self.live_reads}"
            )
        lines.append(f"failover s: {stats(fails)}")
        lines.append(f"recovery s: {stats(sorted(r.recovery_s for r in self.rounds))}")
        lines.append(f"no SEND_OK s: {stats(sorted(r.outage_s for r in self.rounds))}")
        lines.append(f"replica bytes compared: {self.checked_bytes}")
        lines.append(f"violations: {len(self.violations)}")
        lines.extend(f"  {v.kind}: {v.detail}" for v in self.violations[:20])
        return "\n".join(lines)


def read_range(directory: Path, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of a DLedger file queue (files named by their start offset)."""
    out = bytearray()
    if not directory.is_dir():
        return b""
    files = sorted((int(p.name), p) for p in directory.iterdir() if p.name.isdigit())
    for first, path in files:
        size = path.stat().st_size
        lo, hi = max(start, first), min(end, first + size)
        if lo >= hi:
            continue
        with path.open("rb") as f:
            f.seek(lo - first)
            out += f.read(hi - lo)
    return bytes(out)


def units_until(index_dir: Path, first_unit: int, end: int) -> int:
    """The number of index units up to the entry that ends at data position ``end``, scanning
    from unit ``first_unit`` (whose predecessors end at or before ``end``)."""
    n = first_unit
    while True:
        raw = read_range(index_dir, n * UNIT, (n + 1) * UNIT)
        if len(raw) < UNIT:
            raise AssertionError(f"no index unit ends at {end} (stopped at unit {n})")
        _magic, pos, size, _index, _term = _UNIT.unpack(raw)
        n += 1
        if pos + size == end:
            return n
        if pos + size > end or size <= 0:
            raise AssertionError(f"index unit {n - 1} (pos {pos} size {size}) passes {end}")


_Run = TypeVar("_Run", bound="DLedgerChaosRun")


def judged(run: _Run, play: Callable[[_Run], Coroutine[Any, Any, DLedgerReport]]) -> DLedgerReport:
    """Start ``run``, ``play`` it and assert its report: SEND_OKs and live reads happened, no
    violation. On failure print the brokers' output, then the verdict (CI shows a failure's
    tail); stop the run in any case."""
    try:
        run.start()
        report = asyncio.run(play(run))
        print(report.render())  # the summary, shown with -s or on failure
        assert report.summary is not None
        assert report.summary.ok > 0, report.render()
        assert report.live_reads > 0, report.render()
        assert not report.violations, report.render()
    except BaseException as e:
        print(f"dledger chaos seed={run.report.seed}\n{run.dump()}")
        print(f"===== verdict\n{run.report.render()}\n{type(e).__name__}: {e}")
        raise
    finally:
        run.stop()
    return report


class DLedgerChaosRun:
    """Processes, producers, the live consumer and the history of one run under ``tmp``."""

    def __init__(self, tmp: Path, seed: int, net: NetLab | None = None) -> None:
        """``net``: run the NameServer (host ``ns``) and each broker (host ``n0``-``n2``) in a
        host of its own so that links can fail; the test process is the client host."""
        self.tmp = tmp
        self.net = net
        self.rng = random.Random(seed)
        self.report = DLedgerReport(seed=seed)
        self.history = History()
        self.namesrv: Daemon | None = None
        self.ns = ""
        self.group: DLedgerGroup | None = None
        self._paused: set[int] = set()
        self._stop = asyncio.Event()
        self._open = asyncio.Event()  # producers may start new sends
        self._in_flight = 0
        self._oks: list[tuple[float, str]] = []  # (time of the answer, broker) per SEND_OK
        self._ok_began: list[tuple[float, str, str]] = []  # (began, key, broker) per SEND_OK
        self._live: dict[tuple[int, int], str] = {}  # the live consumer's reads
        self._verified_data = 0  # data bytes known identical on all three
        self._verified_units = 0

    # -- processes -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the NameServer and n0, n1, n2."""
        hosts = {n: self._host(n) for n in ("ns", *NODES)}
        self.namesrv, self.ns = start_namesrv(self.tmp, host=hosts["ns"][0], wrap=hosts["ns"][1])
        ports = free_ports(3) if self.net is None else [PEER_PORT] * 3
        peers = ";".join(f"{n}-{hosts[n][0]}:{p}" for n, p in zip(NODES, ports, strict=True))
        self.group = DLedgerGroup(self.tmp, self.ns, peers, BROKER_KEYS)
        if self.net is not None:
            self.group.hosts = {n: hosts[n] for n in NODES}
        for node in NODES:
            self.group.start(node)

    def _host(self, name: str) -> tuple[str, list[str]]:
        """The address a daemon of host ``name`` binds and the argv prefix it runs under."""
        if self.net is None:
            return "127.0.0.1", []
        return self.net.ip[name], self.net.wrap(name)

    @property
    def g(self) -> DLedgerGroup:
        assert self.group is not None
        return self.group

    def stop(self) -> None:
        """Resume paused brokers, stop every daemon."""
        if self.group is not None:
            for d in self.group.daemons.values():
                if d.proc.pid in self._paused:
                    d.proc.send_signal(signal.SIGCONT)
            self.group.stop_all()
        if self.namesrv is not None:
            self.namesrv.stop()

    def dump(self) -> str:
        """The tail of every broker's output, for a failure message."""
        if self.group is None:
            return ""
        return "\n".join(f"===== {n}\n{d.tail(6000)}" for n, d in self.group.daemons.items())

    def _data_dir(self, node: str) -> Path:
        return self.tmp / node / f"dledger-{node}" / "data"

    def _index_dir(self, node: str) -> Path:
        return self.tmp / node / f"dledger-{node}" / "index"

    async def _start(self, node: str) -> None:
        await asyncio.to_thread(self.g.start, node)

    async def _kill(self, node: str) -> None:
        await asyncio.to_thread(self.g.kill, node)

    # -- producers and the live consumer -------------------------------------------------

    async def _attempt(self, client: JavaLikeClient, addr: str, key: str, queue: int) -> bool:
        began = time.monotonic()
        try:
            resp = await client.send(
                addr, TOPIC, key.encode(), queue_id=queue, timeout_s=SEND_TIMEOUT_S
            )
        except ConnectionClosed as e:
            failed = str(e).startswith("connect to")  # refused before a byte was sent
            self.history.send(key, queue, Outcome.FAILED if failed else Outcome.UNKNOWN)
            return False
        except (RemotingError, TimeoutError, OSError):
            self.history.send(key, queue, Outcome.UNKNOWN)
            return False
        if resp.code == ResponseCode.SUCCESS:
            offset = int(resp.ext("queueOffset") or -1)
            self.history.send(key, queue, Outcome.OK, offset, broker=addr)
            self._oks.append((time.monotonic(), addr))
            self._ok_began.append((began, key, addr))
            return True
        # A follower's refusal (SYSTEM_BUSY) stores nothing; anything else (SYSTEM_ERROR "in-sync
        # replicas not enough": appended, not acknowledged by a quorum) may have been stored.
        busy = resp.code == ResponseCode.SYSTEM_BUSY
        self.history.send(key, queue, Outcome.FAILED if busy else Outcome.UNKNOWN)
        return False

    async def _produce(self, producer: int) -> None:
        """Send ``p<producer>-<n>`` round-robin over the queues; retry a key until SEND_OK."""
        client = JavaLikeClient(producer_group=f"dledger-chaos-p{producer}")
        addr: str | None = None
        n = 0
        try:
            while not self._stop.is_set():
                key, queue = f"p{producer}-{n:07d}", n % QUEUES
                while not self._stop.is_set():
                    await self._open.wait()
                    if addr is None:
                        addr = await self._master()
                    ok = False
                    if addr is not None:
                        self._in_flight += 1
                        try:
                            ok = await self._attempt(client, addr, key, queue)
                        finally:
                            self._in_flight -= 1
                    if ok:
                        break
                    addr = None
                    await asyncio.sleep(0.05)
                n += 1
        finally:
            await client.close()

    async def _master(self) -> str | None:
        """The NameServer's brokerId 0, or None (none listed, or the NameServer unreachable:
        a partition may cut the client from it)."""
        with contextlib.suppress(RemotingError, TimeoutError, OSError):
            async with asyncio.timeout(SEND_TIMEOUT_S):
                return await master_addr(self.ns)
        return None

    async def _consume(self) -> None:
        """Pull every queue of the current master from offset 0 on, all along."""
        client = JavaLikeClient()
        offsets = [0] * QUEUES
        addr: str | None = None
        try:
            while not self._stop.is_set():
                if addr is None:
                    addr = await self._master()
                    if addr is None:
                        await asyncio.sleep(0.1)
                        continue
                got = 0
                try:
                    for q in range(QUEUES):
                        resp = await client.pull(
                            addr, "dledger-chaos-live", TOPIC, offsets[q], queue_id=q,
                            expression="*", timeout_s=5.0,
                        )  # fmt: skip
                        if resp.code != ResponseCode.SUCCESS or not resp.body:
                            continue
                        for m in decode_records(resp.body):
                            self._read_live(q, m.queue_offset, m.body.decode())
                            got += 1
                        offsets[q] = max(offsets[q], int(resp.ext("nextBeginOffset") or 0))
                except (RemotingError, TimeoutError, OSError):
                    addr = None
                    await asyncio.sleep(0.1)
                    continue
                if got == 0:
                    addr = None  # re-ask the NameServer: the master may have moved
                    await asyncio.sleep(0.1)
        finally:
            await client.close()

    def _read_live(self, queue: int, offset: int, key: str) -> None:
        before = self._live.setdefault((queue, offset), key)
        self.report.live_reads += 1
        if before != key:
            self.report.violations.append(
                Violation("consumer", f"{queue}/{offset} read as {before}, later as {key}")
            )

    # -- checks --------------------------------------------------------------------------

    async def _committed_ends(self) -> dict[str, int]:
        admin = AdminClient(self.ns)
        try:
            return {
                n: int((await admin.broker_runtime_stats(a)).get("commitLogMaxOffset", "-1"))
                for n, a in self.g.addrs.items()
            }
        finally:
            await admin.close()

    async def check_replicas(self, full: bool = False) -> None:
        """With producers paused: the three agree on the committed position and their data and
        index files are byte-identical up to it (from the last check on, or from 0)."""
        self._open.clear()
        try:
            async with asyncio.timeout(SEND_TIMEOUT_S * 3):
                while self._in_flight:
                    await asyncio.sleep(0.02)
            await self._compare(0 if full else self._verified_data, 0 if full else None)
        finally:
            self._open.set()

    async def _compare(self, data_from: int, units_from: int | None) -> None:
        ends: dict[str, int] = {}
        diff = ""
        try:
            async with asyncio.timeout(REPLICA_TIMEOUT_S):
                while True:
                    with contextlib.suppress(RemotingError):
                        ends = await self._committed_ends()
                    if len(set(ends.values())) == 1 and (end := next(iter(ends.values()))) >= 0:
                        diff = self._diff(data_from, units_from, end)
                        if not diff:
                            return
                    await asyncio.sleep(0.2)
        except TimeoutError:
            self.report.violations.append(
                Violation("replica", f"committed ends {ends}; {diff or 'never agreed'}")
            )

    def _diff(self, data_from: int, units_from: int | None, end: int) -> str:
        """What differs between the members' files up to ``end`` (empty: nothing)."""
        first = NODES[0]
        want = read_range(self._data_dir(first), data_from, end)
        if len(want) != end - data_from:
            return f"{first} holds {len(want)} of {end - data_from} data bytes"
        u_from = self._verified_units if units_from is None else units_from
        units = units_until(self._index_dir(first), u_from, end) if end > 0 else 0
        want_idx = read_range(self._index_dir(first), u_from * UNIT, units * UNIT)
        for node in NODES[1:]:
            got = read_range(self._data_dir(node), data_from, end)
            if got != want:
                at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), 0)
                return f"{node} data differs from {first} at {data_from + at} (end {end})"
            if read_range(self._index_dir(node), u_from * UNIT, units * UNIT) != want_idx:
                return f"{node} index differs from {first} in units {u_from}..{units}"
        self.report.checked_bytes += (end - data_from) * len(NODES)
        self._verified_data, self._verified_units = end, units
        return ""

    def _no_ok_began_after(self, since: float, until: float, why: str) -> None:
        for began, key, _ in self._ok_began:
            if since < began < until:
                self.report.violations.append(
                    Violation("quorum", f"{key} got SEND_OK, begun {began - since:.2f}s {why}")
                )

    # -- rounds --------------------------------------------------------------------------

    async def _leader(self) -> str:
        try:
            return await wait_roles(self.ns, self.g, RECOVERY_TIMEOUT_S)
        except TimeoutError as e:
            # A member that died (not killed by the round) shows here with its exit code.
            gone = {
                n: d.proc.poll() for n, d in self.g.daemons.items() if d.proc.poll() is not None
            }
            raise AssertionError(f"no master with both slaves listed; exited: {gone}") from e

    async def _wait_ok(self, since: float, other_than: str | None = None) -> float:
        """Seconds from ``since`` to the first SEND_OK answered after it (by another broker
        than ``other_than``)."""
        async with asyncio.timeout(RECOVERY_TIMEOUT_S):
            while True:
                for t, addr in reversed(self._oks):
                    if t < since:
                        break
                    if addr != other_than:
                        hits = [x for x, a in self._oks if x >= since and a != other_than]
                        return min(hits) - since
                await asyncio.sleep(0.05)

    async def _failover(self, since: float, old: str | None) -> float:
        took = await self._wait_ok(since, old)
        if took > FAILOVER_LIMIT_S:
            self.report.violations.append(
                Violation("failover", f"no SEND_OK from a new master for {took:.1f}s")
            )
        return took

    def _pause(self, node: str) -> None:
        d = self.g.daemons[node]
        d.proc.send_signal(signal.SIGSTOP)
        self._paused.add(d.proc.pid)

    def _resume(self, node: str) -> None:
        d = self.g.daemons[node]
        d.proc.send_signal(signal.SIGCONT)
        self._paused.discard(d.proc.pid)

    async def _hold(self, low: float, high: float) -> None:
        # The fault's length is part of the seeded schedule, not a wait for a condition.
        await asyncio.sleep(self.rng.uniform(low, high))

    async def _leader_fault(self, fault: Fault, leader: str, began: float) -> float | None:
        """Kill, pause or restart the leader and heal it; the failover time (if measured)."""
        old = self.g.addrs[leader]
        if fault is Fault.KILL_LEADER:
            await self._kill(leader)
            took = await self._failover(began, old)
            await self._start(leader)
            return took
        if fault is Fault.PAUSE_LEADER:
            self._pause(leader)
            try:
                took = await self._failover(began, old)
            finally:
                self._resume(leader)
            return took
        if fault is Fault.RESTART_LEADER:
            await asyncio.to_thread(self.g.daemons.pop(leader).stop)
            await self._start(leader)
            return None
        raise ValueError(fault)

    async def _inject(
        self, fault: Fault, leader: str, began: float
    ) -> tuple[list[str], float | None]:
        """Inject ``fault`` and heal it; the victims and the failover time (if measured)."""
        if fault in (Fault.KILL_LEADER, Fault.PAUSE_LEADER, Fault.RESTART_LEADER):
            return [leader], await self._leader_fault(fault, leader, began)
        followers = [n for n in NODES if n != leader]
        old = self.g.addrs[leader]
        if fault in (Fault.KILL_FOLLOWER, Fault.PAUSE_FOLLOWER):
            victim = self.rng.choice(followers)
            if fault is Fault.PAUSE_FOLLOWER:
                self._pause(victim)
                await self._hold(0.5, 10.0)
                self._resume(victim)
            else:
                await self._kill(victim)
                await self._hold(0.2, 3.0)
                await self._start(victim)
            return [victim], None
        if fault is Fault.KILL_RESTART:
            victim = self.rng.choice(list(NODES))
            await self._kill(victim)
            await self._start(victim)
            took = await self._failover(began, old) if victim == leader else None
            return [victim], took
        if fault is Fault.CRASH_ALL:
            for node in NODES:
                self.g.daemons[node].proc.kill()
            for node in NODES:
                await self._kill(node)
            restarted = time.monotonic()
            for node in NODES:
                await self._start(node)
            return list(NODES), await self._failover(restarted, None)
        # QUORUM_LOSS: no send begun once both followers are dead may be acknowledged.
        for node in followers:
            await self._kill(node)
        dead = time.monotonic()
        await self._hold(1.0, 8.0)
        self._no_ok_began_after(dead, time.monotonic(), "after both followers died")
        for node in followers:
            await self._start(node)
        return followers, None

    async def run_round(self, fault: Fault) -> RoundResult:
        """Inject ``fault``, heal it, wait for recovery and check the replicas."""
        leader = await self._leader()
        began = time.monotonic()
        victims, failover = await self._inject(fault, leader, began)
        return await self.recover(fault, tuple(victims), failover, began)

    async def recover(
        self, fault: StrEnum, victims: tuple[str, ...], failover: float | None, began: float
    ) -> RoundResult:
        """After a round healed its fault: wait for a master with both slaves listed and a
        SEND_OK, check the replicas, and record the round."""
        await self._leader()
        await self._wait_ok(time.monotonic())
        recovery = time.monotonic() - began
        times = [t for t, _ in self._oks if t >= began]
        outage = max(b - a for a, b in zip([began, *times], times, strict=False))
        await self.check_replicas()
        result = RoundResult(fault, victims, failover, recovery, outage)
        self.report.rounds.append(result)
        return result

    async def run(self, rounds: int, faults: list[Fault] | None = None) -> DLedgerReport:
        """``rounds`` fault rounds under load (``faults`` in turn, else seeded random ones),
        then the final checks; the report holds every violation."""

        async def play(i: int) -> RoundResult:
            return await self.run_round(
                faults[i % len(faults)] if faults else self.rng.choice(list(Fault))
            )

        return await self.campaign(rounds, play)

    async def campaign(
        self, rounds: int, play: Callable[[int], Awaitable[RoundResult]]
    ) -> DLedgerReport:
        """Start the load, play rounds ``0..rounds-1``, stop the load, then the final checks;
        the report holds every violation."""
        await self._leader()
        await create_topic(list(self.g.addrs.values()), TOPIC, QUEUES)
        self._open.set()
        tasks = [asyncio.create_task(self._produce(p)) for p in range(PRODUCERS)]
        tasks.append(asyncio.create_task(self._consume()))
        try:
            await self._wait_ok(0.0)
            for i in range(rounds):
                result = await play(i)
                print(f"round {i + 1}/{rounds}: {result.line()}", flush=True)
        finally:
            self._stop.set()
            self._open.set()
            async with asyncio.timeout(SEND_TIMEOUT_S * 3):
                await asyncio.gather(*tasks)
        leader = await self._leader()
        await read_queues(self.history, self.g.addrs[leader], TOPIC, QUEUES)
        self.report.summary = self.history.summary()
        self.report.violations += self.history.check()
        final = {(c.queue_id, c.queue_offset): c.key for c in self.history.consumed}
        for pos, key in sorted(self._live.items()):
            if final.get(pos) != key:
                self.report.violations.append(
                    Violation("consumer", f"live read {key} at {pos}, finally {final.get(pos)}")
                )
        await self.check_replicas(full=True)
        return self.report
