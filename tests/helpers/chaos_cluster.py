"""Randomized fault rounds against a controller-mode broker-set (issue 7 chaos tests).

:class:`ChaosRun` starts mqnamesrv, three mqcontrollers (no unclean election) and three brokers
of broker-a in controller mode with ``allAckInSyncStateSet=true``, all as real processes with
short timeouts. Producers send numbered keys all the time and record every attempt in a
:class:`~tests.helpers.history.History`. Each round injects one fault (SIGKILL, SIGSTOP then
SIGCONT, or a graceful restart of a broker master, a slave, the controller leader or a
follower, or of the master and the controller leader together), heals it, and waits for
recovery: every process up, a master with SyncStateSet {1, 2, 3} listed as brokerId 0 on the
NameServer, and a SEND_OK after that. At the end the producers stop, a consumer reads every
queue of the master from offset 0, the history is checked, and the three replicas' CommitLogs
are compared byte for byte (read from the store files).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ConnectionClosed, RemotingError
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.controller_mode import (
    BROKER_KEYS,
    SAFE_BROKER_KEYS,
    SAFE_CONTROLLER_KEYS,
    broker_addrs,
    commit_log_bytes,
    controller_leader,
    sync_state,
)
from tests.helpers.history import History, Outcome, Summary, Violation
from tests.helpers.netlab import NetLab
from tests.helpers.processes import (
    BROKER_UP,
    Daemon,
    start_broker,
    start_controller,
    start_controllers,
    start_namesrv,
)

TOPIC = "ChaosTopic"
QUEUES = 4
PRODUCERS = 2
ALL = frozenset({1, 2, 3})
FAILOVER_TIMEOUT_S = 15.0
RECOVERY_TIMEOUT_S = 40.0
SEND_TIMEOUT_S = 3.0
#: How long the diverge fault waits for the frozen-slaves master to append its probe send.
DIVERGE_TIMEOUT_S = 10.0
#: How long the final read waits for a queue's max offset to cover its last SEND_OK.
DISPATCH_WAIT_S = 20.0
# A send whose outcome is unknown: stored on the master but not (yet) on the SyncStateSet.
UNKNOWN_CODES = frozenset(
    {
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)
_LOCAL_MAX = re.compile(r"local_max=(\d+)")
_POINT = re.compile(r"\bpoint=(\d+)")


class Fault(StrEnum):
    """One kind of fault a round injects."""

    KILL_MASTER = "kill-master"
    PAUSE_MASTER = "pause-master"
    RESTART_MASTER = "restart-master"
    KILL_SLAVE = "kill-slave"
    PAUSE_SLAVE = "pause-slave"
    KILL_CONTROLLER_LEADER = "kill-controller-leader"
    PAUSE_CONTROLLER_LEADER = "pause-controller-leader"
    KILL_CONTROLLER_FOLLOWER = "kill-controller-follower"
    KILL_MASTER_AND_CONTROLLER_LEADER = "kill-master+controller-leader"
    # Slaves frozen, the master writes on alone, all three SIGKILLed (slaves first, so what
    # sat in their socket buffers is gone): the old master holds a divergent tail.
    DIVERGE_MASTER = "diverge-master"


MASTER_FAULTS = frozenset(
    {
        Fault.KILL_MASTER,
        Fault.PAUSE_MASTER,
        Fault.RESTART_MASTER,
        Fault.KILL_MASTER_AND_CONTROLLER_LEADER,
        Fault.DIVERGE_MASTER,
    }
)


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one round did and how long the cluster took to get over it."""

    fault: str  # a Fault, or a partition's kind (tests/helpers/partition_chaos.py)
    victims: tuple[str, ...]
    # fault -> a new master elected (master faults only; diverge-master: from the restart of
    # the slaves, since nobody can be elected while all three are down)
    failover_s: float | None
    recovery_s: float  # fault -> SyncStateSet {1, 2, 3} again and a SEND_OK after that
    # the longest time without a SEND_OK from the fault to the recovery: the writers' outage
    outage_s: float = 0.0
    note: str = ""  # what else the round observed

    def line(self) -> str:
        """One line for the run's log."""
        failover = "-" if self.failover_s is None else f"{self.failover_s:.2f}s"
        note = f"; {self.note}" if self.note else ""
        return (
            f"{self.fault} on {','.join(self.victims)}: failover {failover}, "
            f"no SEND_OK for {self.outage_s:.2f}s, recovered in {self.recovery_s:.2f}s{note}"
        )


@dataclass(slots=True)
class ChaosReport:
    """The outcome of a run."""

    seed: int
    rounds: list[RoundResult] = field(default_factory=list)
    summary: Summary | None = None
    violations: list[Violation] = field(default_factory=list)
    truncations: int = 0
    boots: list[float] = field(default_factory=list)  # seconds from spawn to boot line

    def render(self) -> str:
        """The human summary printed at the end of a run."""
        kinds = Counter(str(r.fault) for r in self.rounds)
        fails = sorted(r.failover_s for r in self.rounds if r.failover_s is not None)
        recs = sorted(r.recovery_s for r in self.rounds)
        outages: dict[str, list[float]] = {}
        for r in self.rounds:
            outages.setdefault(str(r.fault), []).append(r.outage_s)
        lines = [
            f"chaos seed={self.seed} rounds={len(self.rounds)}",
            "faults: " + ", ".join(f"{k}={n}" for k, n in sorted(kinds.items())),
        ]
        if self.summary is not None:
            s = self.summary
            lines.append(
                f"sends: ok={s.ok} failed={s.failed} unknown={s.unknown} keys={s.keys} "
                f"consumed={s.consumed}"
            )
        lines.append(f"failover s: {stats(fails)}")
        lines.append(f"recovery s: {stats(recs)}")
        lines.extend(
            f"no SEND_OK s, {kind}: {stats(sorted(v))}" for kind, v in sorted(outages.items())
        )
        lines.append(f"broker boots s: {stats(sorted(self.boots))}")
        lines.append(f"divergent tails truncated: {self.truncations}")
        lines.append(f"violations: {len(self.violations)}")
        lines.extend(f"  {v.kind}: {v.detail}" for v in self.violations[:20])
        return "\n".join(lines)


def _truncations(log: str) -> int:
    """How many times a broker cut a divergent tail (truncated below its own max offset)."""
    count = 0
    for line in log.splitlines():
        if "truncate to the consistent point" not in line:
            continue
        local, point = _LOCAL_MAX.search(line), _POINT.search(line)
        if local and point and int(point.group(1)) < int(local.group(1)):
            count += 1
    return count


def stats(values: list[float]) -> str:
    if not values:
        return "none"
    mid = values[len(values) // 2]
    return f"n={len(values)} min={values[0]:.2f} median={mid:.2f} max={values[-1]:.2f}"


async def read_queues(history: History, addr: str, topic: str, queues: int) -> None:
    """Read queues ``0..queues-1`` of ``topic`` on ``addr`` from offset 0 to their max offset
    into ``history`` (shared by the controller-mode and the classic chaos runs).

    A queue's end is its max offset once that covers the highest offset ``history`` holds a
    SEND_OK for there, waited for up to :data:`DISPATCH_WAIT_S`: a broker answers SEND_OK once
    the record is stored (and replicated), and its reput writes the consume-queue unit a moment
    later (longer when that needs a new consume-queue file), so a read right after the last
    SEND_OK may find the max offset one short. An end never reached is read as it is, and the
    history checker names what is missing.

    Raises:
        AssertionError: a queue could not be read to its end within 60 s.
    """
    acked: dict[int, int] = {}
    for s in history.sends:
        if s.outcome is Outcome.OK and s.queue_offset is not None:
            acked[s.queue_id] = max(acked.get(s.queue_id, 0), s.queue_offset + 1)
    client = JavaLikeClient()
    last: object = None
    try:
        async with asyncio.timeout(60 + DISPATCH_WAIT_S):
            for queue in range(queues):
                end = await _max_offset(client, addr, topic, queue, acked.get(queue, 0))
                offset = 0
                while offset < end:
                    resp = await client.pull(
                        addr, "chaos-reader", topic, offset, queue_id=queue, expression="*"
                    )
                    last = (queue, offset, end, resp.code, resp.remark)
                    if resp.code == ResponseCode.SUCCESS and resp.body:
                        for m in decode_records(resp.body):
                            history.consume(m.body.decode(), queue, m.queue_offset)
                    else:
                        await asyncio.sleep(0.1)
                    offset = max(offset, int(resp.ext("nextBeginOffset") or offset))
    except TimeoutError as e:
        raise AssertionError(f"could not read {addr} to the end; last pull {last}") from e
    finally:
        await client.close()


async def _max_offset(
    client: JavaLikeClient, addr: str, topic: str, queue: int, acked_end: int
) -> int:
    """The max offset of ``queue`` once it reaches ``acked_end``, or as it is after
    :data:`DISPATCH_WAIT_S`."""
    ext = {"topic": topic, "queueId": str(queue)}
    deadline = time.monotonic() + DISPATCH_WAIT_S
    while True:
        resp = await client.call(addr, RequestCode.GET_MAX_OFFSET, ext)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        end = int(resp.ext("offset") or 0)
        if end >= acked_end or time.monotonic() > deadline:
            return end
        await asyncio.sleep(0.1)


class ChaosRun:
    """Processes, producers and the history of one chaos run under ``tmp``."""

    def __init__(
        self, tmp: Path, seed: int, broker_keys: str = "", net: NetLab | None = None
    ) -> None:
        """``broker_keys``: extra broker config lines (e.g. default segment sizes); ``net``:
        run each daemon in a host of its own (``ns``, ``n0``-``n2``, ``b1``-``b3``) so that
        links can fail; the test process is the client host."""
        self.tmp = tmp
        self.net = net
        self.broker_keys = broker_keys
        self.rng = random.Random(seed)
        self.report = ChaosReport(seed=seed)
        self.history = History()
        self.ns = ""
        self.namesrv: Daemon | None = None
        self.controllers: list[Daemon | None] = []
        self.controller_addrs: list[str] = []
        self._controller_confs: list[Path] = []
        self.brokers: dict[int, Daemon] = {}
        self.broker_addr: dict[int, str] = {}
        self._paused: set[int] = set()  # pids under SIGSTOP
        self._every_broker: list[Daemon] = []  # restarted ones too: their logs count truncations
        self._stop_producers = asyncio.Event()
        self._ok_count = 0
        self._probes = 0  # the diverge fault's own sends
        self._ok_times: list[float] = []  # monotonic time of every SEND_OK

    # -- processes -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the NameServer, the controller group and brokers 1, 2, 3 (ids are assigned by
        the controller in start order)."""
        host, wrap = self._host("ns")
        self.namesrv, self.ns = start_namesrv(self.tmp, host=host, wrap=wrap)
        hosts = [self._host(f"n{i}") for i in range(3)]
        daemons, self.controller_addrs, self._controller_confs = start_controllers(
            self.tmp,
            3,
            SAFE_CONTROLLER_KEYS,
            hosts=[h for h, _ in hosts] if self.net else None,
            wraps=[w for _, w in hosts],
        )
        self.controllers = list(daemons)
        for broker_id in (1, 2, 3):
            self._start_broker(broker_id)

    def _host(self, name: str) -> tuple[str, list[str]]:
        """The address a daemon of host ``name`` binds and the argv prefix it runs under."""
        if self.net is None:
            return "127.0.0.1", []
        return self.net.ip[name], self.net.wrap(name)

    def _start_broker(self, broker_id: int) -> None:
        tag = f"b{broker_id}"
        host, wrap = self._host(tag)
        extra = (
            BROKER_KEYS + SAFE_BROKER_KEYS + f"controllerAddr={';'.join(self.controller_addrs)}\n"
        ) + self.broker_keys
        began = time.monotonic()
        # A restarted broker may have to wait for its role until another member is back (all
        # three killed, no member electable yet): up is enough, the round waits for recovery.
        daemon, addr = start_broker(
            self.tmp,
            self.ns,
            extra=extra,
            tag=tag,
            store=self.tmp / tag,
            boot=BROKER_UP,
            host=host,
            wrap=wrap,
        )
        self.report.boots.append(time.monotonic() - began)
        self.brokers[broker_id] = daemon
        self._every_broker.append(daemon)
        self.broker_addr[broker_id] = addr

    def _start_controller(self, index: int) -> None:
        daemon, _ = start_controller(
            self._controller_confs[index], self.tmp, self._host(f"n{index}")[1]
        )
        self.controllers[index] = daemon

    def stop(self) -> None:
        """Resume paused processes, then stop every daemon."""
        for daemon in [*self.brokers.values(), *self.controllers]:
            if daemon is not None and daemon.proc.pid in self._paused:
                daemon.proc.send_signal(signal.SIGCONT)
        for daemon in self.brokers.values():
            daemon.stop()
        for ctl in self.controllers:
            if ctl is not None:
                ctl.stop()
        if self.namesrv is not None:
            self.namesrv.stop()

    def dump(self) -> str:
        """The tail of every broker's and controller's output, for a failure message."""
        parts = [f"===== b{i}\n{d.tail(6000)}" for i, d in self.brokers.items()]
        parts += [
            f"===== controller n{i}\n{d.tail(3000)}"
            for i, d in enumerate(self.controllers)
            if d is not None
        ]
        return "\n".join(parts)

    def _kill_broker(self, broker_id: int) -> None:
        daemon = self.brokers[broker_id]
        daemon.proc.kill()
        daemon.stop()

    def _kill_controller(self, index: int) -> None:
        daemon = self.controllers[index]
        assert daemon is not None
        daemon.proc.kill()
        daemon.stop()
        self.controllers[index] = None

    def _pause(self, daemon: Daemon) -> None:
        daemon.proc.send_signal(signal.SIGSTOP)
        self._paused.add(daemon.proc.pid)

    def _resume(self, daemon: Daemon) -> None:
        daemon.proc.send_signal(signal.SIGCONT)
        self._paused.discard(daemon.proc.pid)

    # -- producers and consumer ----------------------------------------------------------

    async def _master_addr(self) -> str | None:
        with contextlib.suppress(RemotingError):
            return (await broker_addrs(self.ns)).get(0)
        return None

    async def _attempt(self, client: JavaLikeClient, addr: str, key: str, queue: int) -> bool:
        """One send attempt, recorded; True on SEND_OK."""
        try:
            resp = await client.send(
                addr, TOPIC, key.encode(), queue_id=queue, timeout_s=SEND_TIMEOUT_S
            )
        except ConnectionClosed as e:
            # Refused before a byte was sent: certainly not stored.
            failed = str(e).startswith("connect to")
            self.history.send(key, queue, Outcome.FAILED if failed else Outcome.UNKNOWN)
            return False
        except RemotingError:
            self.history.send(key, queue, Outcome.UNKNOWN)
            return False
        if resp.code == ResponseCode.SUCCESS:
            offset = int(resp.ext("queueOffset") or -1)
            self.history.send(key, queue, Outcome.OK, offset, broker=addr)
            self._ok_count += 1
            self._ok_times.append(time.monotonic())
            return True
        outcome = Outcome.UNKNOWN if resp.code in UNKNOWN_CODES else Outcome.FAILED
        self.history.send(key, queue, outcome)
        return False

    async def _produce(self, producer: int) -> None:
        """Send keys ``p<producer>-<n>`` round-robin over the queues; retry a key until SEND_OK
        (or the run ends), asking the NameServer for the master after each miss."""
        client = JavaLikeClient(producer_group=f"chaos-p{producer}")
        addr: str | None = None
        n = 0
        try:
            while not self._stop_producers.is_set():
                key, queue = f"p{producer}-{n:06d}", n % QUEUES
                while not self._stop_producers.is_set():
                    if addr is None:
                        addr = await self._master_addr()
                    if addr is not None and await self._attempt(client, addr, key, queue):
                        break
                    addr = None
                    await asyncio.sleep(0.05)
                n += 1
        finally:
            await client.close()

    async def consume_all(self, addr: str) -> None:
        """Read every queue of ``addr`` from offset 0 to its max offset into the history."""
        await read_queues(self.history, addr, TOPIC, QUEUES)

    # -- rounds --------------------------------------------------------------------------

    def _live_controllers(self) -> list[str]:
        return [
            addr
            for addr, d in zip(self.controller_addrs, self.controllers, strict=True)
            if d is not None and d.proc.pid not in self._paused
        ]

    async def _state(self) -> tuple[int | None, int, frozenset[int]]:
        async with asyncio.timeout(RECOVERY_TIMEOUT_S):
            while True:
                with contextlib.suppress(RemotingError):
                    return await sync_state(self._live_controllers())
                await asyncio.sleep(0.1)

    async def _wait_failover(self, old_master: int, old_epoch: int, began: float) -> float | None:
        """Seconds from ``began`` until the controller names another master in a newer epoch;
        None if it did not within FAILOVER_TIMEOUT_S (a SyncStateSet of the old master alone
        has no one else to elect)."""
        while time.monotonic() - began < FAILOVER_TIMEOUT_S:
            with contextlib.suppress(RemotingError):
                master, epoch, _ = await sync_state(self._live_controllers())
                if master is not None and master != old_master and epoch > old_epoch:
                    return time.monotonic() - began
            await asyncio.sleep(0.05)
        return None

    async def wait_recovered(self) -> None:
        """Until a master with SyncStateSet {1, 2, 3} is brokerId 0 on the NameServer and a
        producer got a SEND_OK after that.

        Raises:
            AssertionError: not within RECOVERY_TIMEOUT_S; names the last state seen.
        """
        seen: object = None
        try:
            async with asyncio.timeout(RECOVERY_TIMEOUT_S):
                while True:
                    with contextlib.suppress(RemotingError):
                        seen = state = await sync_state(self._live_controllers())
                        listed = await broker_addrs(self.ns)
                        seen = (state, listed, self.broker_addr)
                        master = state[0]
                        addr = self.broker_addr.get(master) if master is not None else None
                        if state[2] == ALL and addr is not None and listed.get(0) == addr:
                            break
                    await asyncio.sleep(0.1)
                mark = seen = self._ok_count
                while self._ok_count <= mark:
                    await asyncio.sleep(0.05)
        except TimeoutError as e:
            raise AssertionError(f"no recovery; last seen {seen}") from e

    async def _hold(self, low: float, high: float) -> None:
        # The fault's duration is part of the random schedule, not a wait for a condition.
        await asyncio.sleep(self.rng.uniform(low, high))

    async def _kill_restart_controller(self, index: int) -> None:
        await asyncio.to_thread(self._kill_controller, index)
        await self._hold(0.2, 2.0)
        await asyncio.to_thread(self._start_controller, index)

    async def _pause_resume(self, daemon: Daemon, low: float, high: float) -> None:
        self._pause(daemon)
        try:
            await self._hold(low, high)
        finally:
            self._resume(daemon)

    async def _leader_index(self) -> int:
        async with asyncio.timeout(RECOVERY_TIMEOUT_S):
            while (leader := await controller_leader(self._live_controllers())) is None:
                await asyncio.sleep(0.1)
        return self.controller_addrs.index(leader)

    async def _master_fault(
        self, fault: Fault, master: int, epoch: int, began: float
    ) -> float | None:
        """Inject a fault on the master; heal it once another master is elected."""
        if fault is Fault.RESTART_MASTER:
            await asyncio.to_thread(self.brokers[master].stop)
            await asyncio.to_thread(self._start_broker, master)
            return None
        if fault is Fault.PAUSE_MASTER:
            self._pause(self.brokers[master])
            try:
                return await self._wait_failover(master, epoch, began)
            finally:
                self._resume(self.brokers[master])
        if fault is Fault.DIVERGE_MASTER:
            return await self._diverge_master(master, epoch)
        ctl = (
            await self._leader_index() if fault is Fault.KILL_MASTER_AND_CONTROLLER_LEADER else None
        )
        await asyncio.to_thread(self._kill_broker, master)
        if ctl is not None:
            await asyncio.to_thread(self._kill_controller, ctl)
        failover = await self._wait_failover(master, epoch, began)
        if ctl is not None:
            await asyncio.to_thread(self._start_controller, ctl)
        # The old master restarts on its store: it must truncate what it wrote beyond the
        # new master's history and rejoin as a slave.
        await asyncio.to_thread(self._start_broker, master)
        return failover

    async def _diverge_master(self, master: int, epoch: int) -> float | None:
        """Freeze both slaves, make the master append a send of our own, SIGKILL all three;
        restart the slaves (one becomes master: the SyncStateSet still holds them) and then the
        old master, which must cut its tail back to the new master's history.

        Raises:
            AssertionError: the master appended nothing within DIVERGE_TIMEOUT_S.
        """
        slaves = sorted(ALL - {master})
        for s in slaves:
            self._pause(self.brokers[s])
        store = self.tmp / f"b{master}"
        size = len(commit_log_bytes(store))
        # The producers' sends may all be waiting for acks, appended before `size` was read and
        # already on a slave: then nothing diverges. A send appended after both slaves stopped
        # is on no slave, so the old master surely has a tail to cut. It is never acknowledged
        # (both slaves must ack it) and is recorded like any producer's attempt.
        self._probes += 1
        client = JavaLikeClient(producer_group="chaos-diverge")
        addr = self.broker_addr[master]
        probe = asyncio.create_task(self._attempt(client, addr, f"diverge-{self._probes}", 0))
        try:
            async with asyncio.timeout(DIVERGE_TIMEOUT_S):
                while len(commit_log_bytes(store)) <= size:
                    await asyncio.sleep(0.01)
        except TimeoutError:
            raise AssertionError(
                f"b{master} appended nothing in {DIVERGE_TIMEOUT_S} s with both slaves stopped"
            ) from None
        finally:
            # All three at once, the master first: a slave reaped before the master is killed
            # would let the master shrink the SyncStateSet to itself and nobody could be elected.
            for b in (master, *slaves):
                self.brokers[b].proc.kill()
            for b in (master, *slaves):
                await asyncio.to_thread(self.brokers[b].stop)
                self._paused.discard(self.brokers[b].proc.pid)
            async with asyncio.timeout(SEND_TIMEOUT_S * 2):
                await probe
            await client.close()
        for s in slaves:
            await asyncio.to_thread(self._start_broker, s)
        # Failover counts from the moment the slaves are back (nobody could be elected before).
        failover = await self._wait_failover(master, epoch, time.monotonic())
        await asyncio.to_thread(self._start_broker, master)
        return failover

    async def _other_fault(self, fault: Fault, master: int) -> str:
        """Inject a fault on a slave or a controller and heal it; return the victim's name."""
        if fault in (Fault.KILL_SLAVE, Fault.PAUSE_SLAVE):
            victim = self.rng.choice(sorted(ALL - {master}))
            if fault is Fault.PAUSE_SLAVE:
                await self._pause_resume(self.brokers[victim], 0.5, 3.0)
            else:
                await asyncio.to_thread(self._kill_broker, victim)
                await self._hold(0.2, 2.0)
                await asyncio.to_thread(self._start_broker, victim)
            return f"b{victim}"
        leader = await self._leader_index()
        if fault is Fault.PAUSE_CONTROLLER_LEADER:
            daemon = self.controllers[leader]
            assert daemon is not None
            await self._pause_resume(daemon, 0.5, 3.0)
            return f"n{leader}"
        index = leader
        if fault is Fault.KILL_CONTROLLER_FOLLOWER:
            index = self.rng.choice([i for i in range(len(self.controllers)) if i != leader])
        await self._kill_restart_controller(index)
        return f"n{index}"

    async def run_round(self, fault: Fault) -> RoundResult:
        """Inject ``fault``, heal it, and wait until the cluster has recovered."""
        master, epoch, _ = await self._state()
        assert master is not None
        began = time.monotonic()
        failover = None
        if fault in MASTER_FAULTS:
            failover = await self._master_fault(fault, master, epoch, began)
            victims: tuple[str, ...] = (f"b{master}",)
        else:
            victims = (await self._other_fault(fault, master),)
        await self.wait_recovered()
        result = RoundResult(fault, victims, failover, time.monotonic() - began, self.outage(began))
        self.report.rounds.append(result)
        return result

    def outage(self, began: float) -> float:
        """The longest stretch without a SEND_OK from ``began`` to the latest SEND_OK."""
        times = [t for t in self._ok_times if t >= began]
        if not times:
            return time.monotonic() - began
        return max(b - a for a, b in zip([began, *times], times, strict=False))

    # -- the whole run -------------------------------------------------------------------

    async def _create_topic(self) -> None:
        """The topic on every replica (slaves do not sync topic configs from the master)."""
        admin = AdminClient(self.ns)
        spec = TopicSpec(topic=TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        try:
            for addr in self.broker_addr.values():
                await admin.create_topic(addr, spec)
        finally:
            await admin.close()

    def _pick(self, faults: list[Fault] | None, index: int) -> Fault:
        if faults is not None:
            return faults[index % len(faults)]
        return self.rng.choice(list(Fault))

    async def run(self, rounds: int, faults: list[Fault] | None = None) -> ChaosReport:
        """``rounds`` fault rounds under load (``faults`` in turn, else random ones), then the
        checks; the report holds every violation."""
        return await self.campaign(rounds, lambda i: self.run_round(self._pick(faults, i)))

    async def campaign(
        self, rounds: int, play: Callable[[int], Awaitable[RoundResult]]
    ) -> ChaosReport:
        """Start the producers, ``play`` rounds ``0..rounds-1``, stop the producers, read every
        queue back and judge the history."""
        await asyncio.wait_for(self._wait_members(), RECOVERY_TIMEOUT_S)
        await self._create_topic()
        producers = [
            asyncio.create_task(self._produce(p), name=f"chaos-producer-{p}")
            for p in range(PRODUCERS)
        ]
        try:
            await self.wait_recovered()
            for i in range(rounds):
                result = await play(i)
                print(f"round {i + 1}/{rounds}: {result.line()}", flush=True)
        finally:
            self._stop_producers.set()
            async with asyncio.timeout(SEND_TIMEOUT_S * 3):
                await asyncio.gather(*producers)
        master, _, _ = await self._state()
        assert master is not None
        await self.consume_all(self.broker_addr[master])
        self.report.summary = self.history.summary()
        self.report.violations += self.history.check()
        self.report.violations += await self._compare_commit_logs(master)
        self.report.truncations = sum(_truncations(d.output()) for d in self._every_broker)
        return self.report

    async def _wait_members(self) -> None:
        while True:
            with contextlib.suppress(RemotingError):
                master, _, members = await sync_state(self._live_controllers())
                if master is not None and members == ALL:
                    return
            await asyncio.sleep(0.1)

    async def _compare_commit_logs(self, master: int) -> list[Violation]:
        """Every replica's CommitLog equals the master's byte for byte once replication has
        caught up (nothing is sent any more)."""
        want = commit_log_bytes(self.tmp / f"b{master}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(20):
                while any(commit_log_bytes(self.tmp / f"b{i}") != want for i in ALL):
                    await asyncio.sleep(0.1)
        out = []
        for i in sorted(ALL):
            got = commit_log_bytes(self.tmp / f"b{i}")
            if got != want:
                same = next(
                    (k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                    min(len(got), len(want)),
                )
                out.append(
                    Violation(
                        "replica",
                        f"b{i} commit log ({len(got)} bytes) differs from master b{master} "
                        f"({len(want)} bytes) at {same}",
                    )
                )
        return out
