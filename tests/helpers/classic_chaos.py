"""Randomized fault rounds against a classic master/slave deployment with an acting master
(issue 8 chaos tests; ha.md 2.4, acceptance S-01..S-03, N-02).

:class:`ClassicChaosRun` starts mqnamesrv (``supportActingMaster``), broker-a's SYNC_MASTER
(``inSyncReplicas=2``) and its SLAVE, both with ``enableSlaveActingMaster`` and
``enableRemoteEscape``, and broker-b's master (the escape target), all as real processes with
short timings. Two producers send numbered keys to broker-a's master and record every attempt in
a :class:`~tests.helpers.history.History`; every SEND_OK is checked against the slave's
CommitLog file at the acknowledged offset (the sync double write). A live consumer pulls from
whatever the route lists as broker-a's brokerId 0 (the master, or the acting slave) and commits
its offsets there. Each round injects one fault (SIGKILL, SIGSTOP/SIGCONT or restart of the
master, the slave or broker-b), heals it and waits for recovery: the route shows the master
writable with the slave beside it, broker-b is listed, and a SEND_OK arrives after that. At the
end every queue is read back from the master and the history is checked; the slave's CommitLog
must equal the master's up to the slave's length.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from rocketpy.client.admin import AdminClient, TopicRoute, TopicSpec, parse_route
from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ConnectionClosed, RemotingError
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.chaos_cluster import SEND_TIMEOUT_S, UNKNOWN_CODES, read_queues, stats
from tests.helpers.controller_mode import commit_log_bytes
from tests.helpers.history import History, Outcome, Summary, Violation
from tests.helpers.processes import Daemon, start_broker, start_namesrv

TOPIC = "ClassicChaos"
DELAY_TOPIC = "ClassicDelay"
QUEUES = 4
PRODUCERS = 2
GROUP = "classic-g"
RECOVERY_TIMEOUT_S = 40.0
ACTING_TIMEOUT_S = 15.0
SLAVE_TIMEOUT_S = 1.0
SEGMENT = 65536  # start_broker's mappedFileSizeCommitLog

NAMESRV_KEYS = (
    "supportActingMaster=true\nnotifyMinBrokerIdChanged=true\nscanNotActiveBrokerInterval=200\n"
)
_COMMON = (
    "haListenPort=0\nhaSendHeartbeatInterval=200\nhaHousekeepingInterval=3000\n"
    "haReconnectInterval=100\nmessageDelayLevel=1s 2s 3s\nflushConsumerOffsetInterval=200\n"
    "flushDelayOffsetInterval=200\nscheduleScanInterval=50\n"
)
_ACTING = (
    _COMMON + "enableSlaveActingMaster=true\nenableRemoteEscape=true\ntotalReplicas=2\n"
    "brokerNotActiveTimeoutMillis=3000\nbrokerHeartbeatInterval=200\n"
    "syncBrokerMemberGroupPeriod=200\n"
)
MASTER_A = (
    _ACTING + "brokerId=0\nbrokerRole=SYNC_MASTER\ninSyncReplicas=2\n"
    f"slaveTimeout={int(SLAVE_TIMEOUT_S * 1000)}\n"
)
SLAVE_A = _ACTING + "brokerId=1\nbrokerRole=SLAVE\n"
MASTER_B = _COMMON + "brokerId=0\nbrokerRole=ASYNC_MASTER\n"
_CONF = {"m": MASTER_A, "s": SLAVE_A, "b": MASTER_B}
_NAME = {"m": "broker-a", "s": "broker-a", "b": "broker-b"}


class Fault(StrEnum):
    """One kind of fault a round injects."""

    # SIGKILL the master; the slave acts (read-only brokerId 0), consumers move to it, a
    # send-back and a due delayed message are escaped to broker-b; the master returns.
    KILL_MASTER = "kill-master"
    KILL_RESTART_MASTER = "kill-restart-master"  # SIGKILL and restart before the slave acts
    PAUSE_MASTER = "pause-master"  # SIGSTOP shorter than brokerNotActiveTimeoutMillis
    RESTART_MASTER = "restart-master"  # SIGTERM and start again
    KILL_SLAVE = "kill-slave"
    PAUSE_SLAVE = "pause-slave"  # sends answer FLUSH_SLAVE_TIMEOUT after slaveTimeout
    KILL_BROKER_B = "kill-broker-b"
    PAUSE_BROKER_B = "pause-broker-b"


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one round did and how long the deployment took to get over it."""

    fault: Fault
    acting_s: float | None  # SIGKILL -> the route lists the slave as brokerId 0, read-only
    takeover_s: float | None  # master restart -> the route lists it as brokerId 0, writable
    recovery_s: float  # fault -> recovered and a SEND_OK after that

    def line(self) -> str:
        """One line for the run's log."""
        acting = "-" if self.acting_s is None else f"{self.acting_s:.2f}s"
        takeover = "-" if self.takeover_s is None else f"{self.takeover_s:.2f}s"
        return (
            f"{self.fault}: acting {acting}, takeover {takeover}, "
            f"recovered in {self.recovery_s:.2f}s"
        )


@dataclass(slots=True)
class ClassicReport:
    """The outcome of a run."""

    seed: int
    rounds: list[RoundResult] = field(default_factory=list)
    summary: Summary | None = None
    violations: list[Violation] = field(default_factory=list)
    codes: Counter[int] = field(default_factory=Counter)
    escaped: int = 0
    live_consumed: int = 0

    def render(self) -> str:
        """The human summary printed at the end of a run."""
        kinds = Counter(str(r.fault) for r in self.rounds)
        lines = [
            f"classic chaos seed={self.seed} rounds={len(self.rounds)}",
            "faults: " + ", ".join(f"{k}={n}" for k, n in sorted(kinds.items())),
        ]
        if self.summary is not None:
            s = self.summary
            lines.append(
                f"sends: ok={s.ok} failed={s.failed} unknown={s.unknown} keys={s.keys} "
                f"consumed={s.consumed} live-consumed={self.live_consumed}"
            )
        lines.append("answers: " + ", ".join(f"{c}={n}" for c, n in sorted(self.codes.items())))
        for name, values in (
            ("acting", [r.acting_s for r in self.rounds]),
            ("takeover", [r.takeover_s for r in self.rounds]),
            ("recovery", [r.recovery_s for r in self.rounds]),
        ):
            lines.append(f"{name} s: {stats(sorted(v for v in values if v is not None))}")
        lines.append(f"escaped messages found on broker-b: {self.escaped}")
        lines.append(f"violations: {len(self.violations)}")
        lines += [f"  {v.kind}: {v.detail}" for v in self.violations[:20]]
        return "\n".join(lines)


def _on_disk(store: Path, offset: int, size: int) -> bytes:
    """``size`` bytes of a store's CommitLog file at ``offset`` (empty if the file is absent)."""
    path = store / "commitlog" / f"{offset - offset % SEGMENT:020d}"
    if not path.exists():
        return b""
    with path.open("rb") as f:
        f.seek(offset % SEGMENT)
        return f.read(size)


def _broker_a(route: TopicRoute | None) -> tuple[dict[int, str], list[int]]:
    """broker-a's ``brokerId -> address`` and its queue perms in a topic route."""
    if route is None:
        return {}, []
    addrs = [b.broker_addrs for b in route.brokers if b.broker_name == "broker-a"]
    perms = [q.perm for q in route.queues if q.broker_name == "broker-a"]
    return (dict(addrs[0]) if addrs else {}), perms


class ClassicChaosRun:
    """Processes, producers, the live consumer and the history of one run under ``tmp``."""

    def __init__(self, tmp: Path, seed: int) -> None:
        self.tmp = tmp
        self.rng = random.Random(seed)
        self.report = ClassicReport(seed=seed)
        self.history = History()
        self.ns = ""
        self.namesrv: Daemon | None = None
        self.daemons: dict[str, Daemon] = {}
        self.addr: dict[str, str] = {}
        self.committed: dict[int, int] = {}  # the live consumer's last successful commits
        self._paused: set[int] = set()
        self._stop = asyncio.Event()
        self._ok_count = 0
        self._slave_down = False  # SEND_OKs are checked on the slave's disk unless it is down
        # the live consumer's gate; per address: pulls with messages then committed, and the
        # last message pulled (commit-log offset, body)
        self._consumer_open = asyncio.Event()
        self._consumer_open.set()
        self._consumer_held = asyncio.Event()
        self.consumed_on: Counter[str] = Counter()
        self._last_from: dict[str, tuple[int, bytes]] = {}
        self._client = JavaLikeClient()

    # -- processes -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the NameServer, broker-b and broker-a's master (the slave comes in run())."""
        self.namesrv, self.ns = start_namesrv(self.tmp, NAMESRV_KEYS)
        self._start("b")
        self._start("m")

    def _start(self, tag: str) -> None:
        daemon, addr = start_broker(
            self.tmp, self.ns, name=_NAME[tag], extra=_CONF[tag], tag=tag, store=self.tmp / tag
        )
        self.daemons[tag] = daemon
        self.addr[tag] = addr

    def stop(self) -> None:
        """Resume paused processes, then stop every daemon."""
        for daemon in self.daemons.values():
            if daemon.proc.pid in self._paused:
                daemon.proc.send_signal(signal.SIGCONT)
        for daemon in self.daemons.values():
            daemon.stop()
        if self.namesrv is not None:
            self.namesrv.stop()

    def dump(self) -> str:
        """The tail of every broker's output, for a failure message."""
        return "\n".join(f"===== {t}\n{d.tail(6000)}" for t, d in self.daemons.items())

    def _kill(self, tag: str) -> None:
        daemon = self.daemons[tag]
        daemon.proc.kill()
        daemon.stop()

    def _pause(self, tag: str) -> None:
        self.daemons[tag].proc.send_signal(signal.SIGSTOP)
        self._paused.add(self.daemons[tag].proc.pid)

    def _resume(self, tag: str) -> None:
        self.daemons[tag].proc.send_signal(signal.SIGCONT)
        self._paused.discard(self.daemons[tag].proc.pid)

    # -- queries -------------------------------------------------------------------------

    async def route(self, topic: str = TOPIC) -> TopicRoute | None:
        """The topic's route from the NameServer, None if it has none."""
        with contextlib.suppress(RemotingError):
            ext = {"topic": topic}
            resp = await self._client.call(
                self.ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, timeout_s=2
            )
            if resp.code == ResponseCode.SUCCESS:
                return parse_route(resp.body or b"{}")
        return None

    async def _wait(
        self, probe: Callable[[], Awaitable[bool]], timeout_s: float, what: str
    ) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                while not await probe():
                    await asyncio.sleep(0.05)
        except TimeoutError as e:
            raise AssertionError(f"{what} not within {timeout_s}s") from e

    @staticmethod
    def _probe(condition: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            return condition()

        return probe

    async def _route_is(self, want: dict[int, str], perm: int) -> bool:
        route = await self.route()
        addrs, perms = _broker_a(route)
        listed_b = route is not None and any(b.broker_name == "broker-b" for b in route.brokers)
        return addrs == want and perms == [perm] and listed_b

    async def _members(self) -> set[int]:
        ext = {"clusterName": "DefaultCluster", "brokerName": "broker-a"}
        with contextlib.suppress(RemotingError):
            resp = await self._client.call(self.ns, RequestCode.GET_BROKER_MEMBER_GROUP, ext)
            group = fastjson.loads(resp.body or b"{}").get("brokerMemberGroup") or {}
            return {int(k) for k in group.get("brokerAddrs") or {}}
        return set()

    async def offsets(self, addr: str) -> dict[int, int]:
        """GROUP's committed offsets of TOPIC on ``addr`` (-1: none)."""
        out = {}
        for q in range(QUEUES):
            ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(q)}
            resp = await self._client.call(addr, RequestCode.QUERY_CONSUMER_OFFSET, ext)
            ok = resp.code == ResponseCode.SUCCESS
            out[q] = int(resp.ext("offset") or -1) if ok else -1
        return out

    async def find_on_b(self, topic: str, body: bytes) -> bool:
        """Whether some queue of ``topic`` on broker-b holds a message with ``body``."""
        for q in range(QUEUES):
            with contextlib.suppress(RemotingError):
                resp = await self._client.pull(
                    self.addr["b"], GROUP, topic, 0, queue_id=q, expression="*", timeout_s=3
                )
                ok = resp.code == ResponseCode.SUCCESS and resp.body
                if ok and any(m.body == body for m in decode_records(resp.body or b"")):
                    return True
        return False

    # -- producers and the live consumer -------------------------------------------------

    async def _attempt(self, client: JavaLikeClient, key: str, queue: int) -> bool:
        """One send attempt to broker-a's master, recorded; True on SEND_OK."""
        began = time.monotonic()
        try:
            resp = await client.send(
                self.addr["m"], TOPIC, key.encode(), queue_id=queue, timeout_s=SEND_TIMEOUT_S
            )
        except ConnectionClosed as e:
            failed = str(e).startswith("connect to")  # refused: certainly not stored
            self.history.send(key, queue, Outcome.FAILED if failed else Outcome.UNKNOWN)
            return False
        except RemotingError:
            self.history.send(key, queue, Outcome.UNKNOWN)
            return False
        self.report.codes[resp.code] += 1
        if resp.code == ResponseCode.FLUSH_SLAVE_TIMEOUT and (
            time.monotonic() - began < SLAVE_TIMEOUT_S * 0.9
        ):
            self._violate("sync", f"{key}: FLUSH_SLAVE_TIMEOUT before slaveTimeout")
        if resp.code != ResponseCode.SUCCESS:
            outcome = Outcome.UNKNOWN if resp.code in UNKNOWN_CODES else Outcome.FAILED
            self.history.send(key, queue, outcome)
            return False
        self.history.send(key, queue, Outcome.OK, int(resp.ext("queueOffset") or -1))
        self._ok_count += 1
        offset = int((resp.ext("msgId") or "0")[-16:], 16)
        if not self._slave_down and key.encode() not in _on_disk(self.tmp / "s", offset, 200):
            self._violate("sync", f"{key}: SEND_OK at {offset} but not on the slave's disk")
        return True

    async def _produce(self, producer: int) -> None:
        """Send keys ``p<producer>-<n>`` round-robin over the queues; retry a key until SEND_OK
        (or the run ends)."""
        client = JavaLikeClient(producer_group=f"classic-p{producer}")
        n = 0
        try:
            while not self._stop.is_set():
                key, queue = f"p{producer}-{n:06d}", n % QUEUES
                while not self._stop.is_set():
                    if await self._attempt(client, key, queue):
                        break
                    await asyncio.sleep(0.05)
                n += 1
        finally:
            await client.close()

    async def _consume(self) -> None:
        """Pull every queue from broker-a's brokerId 0 in the route and commit there; queue
        offsets must strictly increase per queue."""
        client = JavaLikeClient()
        next_offset = dict.fromkeys(range(QUEUES), 0)
        try:
            while not self._stop.is_set():
                if not self._consumer_open.is_set():
                    self._consumer_held.set()
                    await self._consumer_open.wait()
                    self._consumer_held.clear()
                addr = _broker_a(await self.route())[0].get(0)
                if addr is None:
                    await asyncio.sleep(0.1)
                    continue
                with contextlib.suppress(RemotingError):
                    for q in range(QUEUES):
                        await self._consume_queue(client, addr, q, next_offset)
                await asyncio.sleep(0.05)
        finally:
            await client.close()

    async def _consume_queue(
        self, client: JavaLikeClient, addr: str, q: int, next_offset: dict[int, int]
    ) -> None:
        resp = await client.pull(
            addr, GROUP, TOPIC, next_offset[q], queue_id=q, expression="*", timeout_s=3
        )
        pulled = False
        if resp.code == ResponseCode.SUCCESS and resp.body:
            for m in decode_records(resp.body):
                if m.queue_offset < next_offset[q]:
                    self._violate("order", f"live q{q}: {m.queue_offset} < {next_offset[q]}")
                next_offset[q] = m.queue_offset + 1
                self._last_from[addr] = (m.commit_log_offset, m.body)
                self.report.live_consumed += 1
                pulled = True
        ext = {
            "consumerGroup": GROUP,
            "topic": TOPIC,
            "queueId": str(q),
            "commitOffset": str(next_offset[q]),
        }
        commit = await client.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext, timeout_s=3)
        if commit.code == ResponseCode.SUCCESS:
            self.committed[q] = next_offset[q]
            if pulled:
                self.consumed_on[addr] += 1

    def _violate(self, kind: str, detail: str) -> None:
        self.report.violations.append(Violation(kind, detail))

    # -- rounds --------------------------------------------------------------------------

    async def wait_recovered(self) -> None:
        """Until the route lists broker-a's master writable with the slave, broker-b is listed
        and a producer got a SEND_OK after that (under sync: the slave has it)."""
        want = {0: self.addr["m"], 1: self.addr["s"]}
        await self._wait(lambda: self._route_is(want, 6), RECOVERY_TIMEOUT_S, f"route {want}")
        mark = self._ok_count

        async def sent() -> bool:
            return self._ok_count > mark

        await self._wait(sent, RECOVERY_TIMEOUT_S, "a SEND_OK after recovery")

    async def _hold(self, low: float, high: float) -> None:
        # The fault's duration is part of the random schedule, not a wait for a condition.
        await asyncio.sleep(self.rng.uniform(low, high))

    async def _send_delayed(self, body: bytes) -> None:
        async def sent() -> bool:
            with contextlib.suppress(RemotingError):
                props = {"DELAY": "2"}
                resp = await self._client.send(self.addr["m"], DELAY_TOPIC, body, props=props)
                return resp.code == ResponseCode.SUCCESS
            return False

        await self._wait(sent, RECOVERY_TIMEOUT_S, "SEND_OK of a delayed message")

    async def _acting(self, index: int) -> float:
        """Kill the master; the slave must act, serve consumers and escape; returns acting_s.

        The consumer is held from before the kill until the acting route is seen, with a
        SEND_OK (so on the sync slave) it has not read. Unheld, it could see the route flip
        first (as the master's channel closes, while the kill runs in a thread) and drain the
        slave before we look; producers write only to the dead master, so nothing more comes."""
        delayed = b"delayed-%d" % index
        await self._send_delayed(delayed)
        slave = self.addr["s"]
        self._consumer_open.clear()
        try:
            await self._wait(self._probe(self._consumer_held.is_set), ACTING_TIMEOUT_S, "held")
            consumed, ok = self.consumed_on[slave], self._ok_count
            unread = self._probe(lambda: self._ok_count > ok)
            await self._wait(unread, RECOVERY_TIMEOUT_S, "a SEND_OK while the consumer is held")
            await asyncio.to_thread(self._kill, "m")
            began = time.monotonic()
            await self._wait(
                lambda: self._route_is({0: slave}, 4), ACTING_TIMEOUT_S, "acting slave"
            )
            acting_s = time.monotonic() - began
        finally:
            self._consumer_open.set()

        # the consumer moves to the acting slave, pulls there and commits there
        consuming = self._probe(lambda: self.consumed_on[slave] > consumed)
        await self._wait(consuming, ACTING_TIMEOUT_S, "consumption from the acting slave")
        offset, body = self._last_from[slave]
        ext = {
            "offset": str(offset),
            "group": GROUP,
            "delayLevel": "1",
            "originTopic": TOPIC,
            "maxReconsumeTimes": "16",
        }
        back = await self._client.call(slave, RequestCode.CONSUMER_SEND_MSG_BACK, ext)
        if back.code != ResponseCode.SUCCESS:
            self._violate("escape", f"send-back on the acting slave: {back.code} {back.remark}")
        for topic, want in ((f"%RETRY%{GROUP}", body), (DELAY_TOPIC, delayed)):
            try:
                await self._wait(
                    lambda t=topic, w=want: self.find_on_b(t, w), ACTING_TIMEOUT_S, "escape"
                )
                self.report.escaped += 1
            except AssertionError:
                self._violate("escape", f"{want!r} never reached broker-b's {topic}")
        return acting_s

    async def _master_fault(self, fault: Fault, index: int) -> tuple[float | None, float | None]:
        """Inject a fault on broker-a's master and bring it back; (acting_s, takeover_s)."""
        before = await self.offsets(self.addr["m"])
        await self._hold(0.5, 1.0)  # past flushConsumerOffsetInterval: ``before`` is on disk
        acting_s = None
        if fault is Fault.PAUSE_MASTER:
            self._pause("m")
            await self._hold(0.5, 2.0)
            self._resume("m")
            return None, None
        if fault is Fault.RESTART_MASTER:
            await asyncio.to_thread(self.daemons["m"].stop)
        elif fault is Fault.KILL_RESTART_MASTER:
            await asyncio.to_thread(self._kill, "m")
        else:
            acting_s = await self._acting(index)
        floor = {q: max(before[q], self.committed.get(q, -1)) for q in range(QUEUES)}
        restarted = time.monotonic()
        await asyncio.to_thread(self._start, "m")
        want = {0: self.addr["m"], 1: self.addr["s"]}
        await self._wait(lambda: self._route_is(want, 6), RECOVERY_TIMEOUT_S, "takeover")
        takeover_s = time.monotonic() - restarted
        after = await self.offsets(self.addr["m"])
        for q in range(QUEUES):
            if after[q] < floor[q]:
                self._violate("offset", f"{fault} q{q}: {after[q]} after return < {floor[q]}")
        return acting_s, takeover_s

    async def _other_fault(self, fault: Fault) -> None:
        tag = "s" if fault in (Fault.KILL_SLAVE, Fault.PAUSE_SLAVE) else "b"
        if fault in (Fault.PAUSE_SLAVE, Fault.PAUSE_BROKER_B):
            self._pause(tag)
            await self._hold(1.5, 3.0)  # longer than slaveTimeout: sends time out
            self._resume(tag)
            return
        if tag == "s":
            self._slave_down = True
        await asyncio.to_thread(self._kill, tag)
        await self._hold(0.2, 2.0)
        await asyncio.to_thread(self._start, tag)
        self._slave_down = False

    async def run_round(self, fault: Fault, index: int) -> RoundResult:
        """Inject ``fault``, heal it, and wait until the deployment has recovered."""
        began = time.monotonic()
        acting_s = takeover_s = None
        if fault in (
            Fault.KILL_MASTER,
            Fault.KILL_RESTART_MASTER,
            Fault.PAUSE_MASTER,
            Fault.RESTART_MASTER,
        ):
            acting_s, takeover_s = await self._master_fault(fault, index)
        else:
            await self._other_fault(fault)
        await self.wait_recovered()
        result = RoundResult(fault, acting_s, takeover_s, time.monotonic() - began)
        self.report.rounds.append(result)
        return result

    # -- the whole run -------------------------------------------------------------------

    async def _setup(self) -> None:
        """broker-a's slave once the master is a member, then the topics on all three."""

        async def members(want: set[int]) -> bool:
            return await self._members() == want

        await self._wait(lambda: members({0}), RECOVERY_TIMEOUT_S, "master registered")
        await asyncio.to_thread(self._start, "s")
        await self._wait(lambda: members({0, 1}), RECOVERY_TIMEOUT_S, "slave registered")
        admin = AdminClient(self.ns)
        try:
            for addr in self.addr.values():
                for topic, queues in ((TOPIC, QUEUES), (DELAY_TOPIC, QUEUES)):
                    spec = TopicSpec(topic=topic, read_queue_nums=queues, write_queue_nums=queues)
                    await admin.create_topic(addr, spec)
        finally:
            await admin.close()

    def _pick(self, faults: list[Fault] | None, index: int) -> Fault:
        if faults is not None:
            return faults[index % len(faults)]
        return self.rng.choice(list(Fault))

    async def run(self, rounds: int, faults: list[Fault] | None = None) -> ClassicReport:
        """``rounds`` fault rounds under load (``faults`` in turn, else random ones), then the
        checks; the report holds every violation."""
        try:
            await self._setup()
            tasks = [
                asyncio.create_task(self._produce(p), name=f"classic-producer-{p}")
                for p in range(PRODUCERS)
            ]
            tasks.append(asyncio.create_task(self._consume(), name="classic-consumer"))
            try:
                await self.wait_recovered()
                for i in range(rounds):
                    result = await self.run_round(self._pick(faults, i), i)
                    print(f"round {i + 1}/{rounds}: {result.line()}", flush=True)
            finally:
                self._stop.set()
                async with asyncio.timeout(SEND_TIMEOUT_S * 4):
                    await asyncio.gather(*tasks)
            await read_queues(self.history, self.addr["m"], TOPIC, QUEUES)
            self.report.summary = self.history.summary()
            self.report.violations += self.history.check()
            self.report.violations += await self._compare_commit_logs()
        finally:
            await self._client.close()
        return self.report

    async def _compare_commit_logs(self) -> list[Violation]:
        """The slave's CommitLog equals the master's up to the slave's length, and reaches the
        master's end once nothing is sent any more."""
        master, slave = self.tmp / "m", self.tmp / "s"
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(20):
                while commit_log_bytes(slave) != commit_log_bytes(master):
                    await asyncio.sleep(0.1)
        want, got = commit_log_bytes(master), commit_log_bytes(slave)
        if want[: len(got)] != got or len(got) != len(want):
            same = next(
                (k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                min(len(got), len(want)),
            )
            detail = f"slave ({len(got)} bytes) vs master ({len(want)} bytes): first diff {same}"
            return [Violation("replica", detail)]
        return []
