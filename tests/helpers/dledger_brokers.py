"""Three ``mqbroker`` processes of one DLedger CommitLog group on loopback (dledger-commitlog.md
section 6's setup): free peer ports, per-node stores, NameServer view of the group."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rocketpy.broker.store_api import StoredMessage
from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemotingError
from rocketpy.tools.children import free_ports
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.history import History, Outcome
from tests.helpers.processes import Daemon, start_broker, start_namesrv

CLUSTER = "RaftCluster"
GROUP = "RaftNode00"
NODES = ("n0", "n1", "n2")


@dataclass
class DLedgerGroup:
    """The three brokers of :data:`GROUP`; ``daemons``/``addrs`` by self id."""

    tmp: Path
    namesrv: str
    peers: str
    extra: str = ""
    daemons: dict[str, Daemon] = field(default_factory=dict)
    addrs: dict[str, str] = field(default_factory=dict)
    # node -> (the address it binds, the argv prefix it runs under): a host of its own
    # (tests/helpers/netlab.py); a node not listed runs on 127.0.0.1
    hosts: dict[str, tuple[str, list[str]]] = field(default_factory=dict)

    def start(self, node: str) -> str:
        """Start (or restart, on its store) broker ``node``; return its address."""
        extra = (
            f"brokerClusterName={CLUSTER}\nenableDLegerCommitLog=true\ndLegerGroup={GROUP}\n"
            f"dLegerPeers={self.peers}\ndLegerSelfId={node}\nsendMessageThreadPoolNums=16\n"
            f"{self.extra}"
        )
        host, wrap = self.hosts.get(node, ("127.0.0.1", []))
        daemon, addr = start_broker(
            self.tmp, self.namesrv, name=GROUP, tag=node, store=self.tmp / node, extra=extra,
            host=host, wrap=wrap,
        )  # fmt: skip
        self.daemons[node], self.addrs[node] = daemon, addr
        return addr

    def kill(self, node: str) -> None:
        """SIGKILL ``node`` and reap it."""
        daemon = self.daemons.pop(node)
        daemon.proc.kill()
        daemon.stop()

    def stop_all(self) -> dict[str, int]:
        """SIGTERM every broker still running; their exit codes."""
        return {node: self.daemons.pop(node).stop() for node in list(self.daemons)}

    def dump(self) -> None:
        """Print each broker's output (for a failing test)."""
        for node, d in self.daemons.items():
            print(f"===== {node}\n{d.tail(6000)}")


def start_group(tmp: Path, namesrv: str, extra: str = "") -> DLedgerGroup:
    """Three brokers n0, n1, n2 of one group, each with its own store under ``tmp``."""
    ports = free_ports(3)
    peers = ";".join(f"{n}-127.0.0.1:{p}" for n, p in zip(NODES, ports, strict=True))
    group = DLedgerGroup(tmp, namesrv, peers, extra)
    try:
        for node in NODES:
            group.start(node)
    except BaseException:
        group.dump()
        group.stop_all()
        raise
    return group


@contextlib.contextmanager
def running_group(tmp: Path, extra: str = "") -> Iterator[tuple[DLedgerGroup, str]]:
    """A NameServer and a :func:`start_group` group, yielded as (group, NameServer address). On
    a failure the daemons' logs are dumped; at the end every daemon is stopped, and (when the
    body passed) each must have exited 0."""
    namesrv, ns = start_namesrv(tmp)
    group = start_group(tmp, ns, extra=extra)
    try:
        yield group, ns
    except BaseException:
        group.dump()
        raise
    finally:
        codes = group.stop_all()
        assert namesrv.stop() == 0
    assert set(codes.values()) == {0}, codes


async def group_addrs(ns: str) -> dict[int, str]:
    """The group's ``brokerId -> address`` as the NameServer lists it."""
    admin = AdminClient(ns)
    try:
        info = await admin.cluster_info()
    finally:
        await admin.close()
    found = info.brokers.get(GROUP)
    return dict(found.broker_addrs) if found else {}


async def wait_roles(ns: str, group: DLedgerGroup, timeout_s: float) -> str:
    """Wait until the NameServer lists one running node as brokerId 0 and every other running
    node under its slave id (selfNum + 1); return the master's node id."""
    async with asyncio.timeout(timeout_s):
        while True:
            got = await group_addrs(ns)
            for node, addr in group.addrs.items():
                if node not in group.daemons or got.get(0) != addr:
                    continue
                others = {
                    int(n[1:]) + 1: a for n, a in group.addrs.items()
                    if n != node and n in group.daemons
                }  # fmt: skip
                if got == {0: addr, **others}:
                    return node
            await asyncio.sleep(0.1)


async def create_topic(addrs: list[str], topic: str, queues: int) -> None:
    """``topic`` on every broker of the group."""
    admin = AdminClient("127.0.0.1:1")
    try:
        for addr in addrs:
            await admin.create_topic(
                addr, TopicSpec(topic=topic, read_queue_nums=queues, write_queue_nums=queues)
            )
    finally:
        await admin.close()


async def read_queue(addr: str, topic: str, queue_id: int, timeout_s: float) -> list[bytes]:
    """Every message of one queue from offset 0 until a pull finds nothing new."""
    client = JavaLikeClient()
    got: list[bytes] = []
    offset = 0
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                resp = await client.pull(
                    addr, "reader", topic, offset, queue_id=queue_id, expression="*",
                    suspend_ms=0,
                )  # fmt: skip
                if resp.code != ResponseCode.SUCCESS or resp.body is None:
                    return got
                got.extend(m.body for m in decode_records(resp.body))
                offset = int(resp.ext("nextBeginOffset") or offset)
    finally:
        await client.close()


async def read_queue_until(
    addr: str,
    topic: str,
    queue_id: int,
    want: list[bytes],
    timeout_s: float,
    *,
    never: bytes | None = None,
) -> list[bytes]:
    """Read one queue (:func:`read_queue`) until its bodies are ``want`` or ``timeout_s`` passes;
    the last bodies read. A SEND_OK precedes the ConsumeQueue dispatch of its entry, as
    upstream's, and a follower's committed position moves with the leader's next push: a read
    right after the sends may come back short. ``never``: a body no read may return."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = await read_queue(addr, topic, queue_id, timeout_s)
        assert never is None or never not in got, got
        if got == want or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.2)


async def master_addr(ns: str) -> str | None:
    """The address the NameServer lists as the group's brokerId 0."""
    return (await group_addrs(ns)).get(0)


async def read_all(addr: str, topic: str, queues: int, timeout_s: float) -> list[StoredMessage]:
    """Every message of every queue of ``topic`` on ``addr`` (with its queue offset)."""
    client = JavaLikeClient()
    out: list[StoredMessage] = []
    try:
        async with asyncio.timeout(timeout_s):
            for q in range(queues):
                offset = 0
                while True:
                    resp = await client.pull(
                        addr, "reader", topic, offset, queue_id=q, expression="*", max_nums=32
                    )
                    if resp.code != ResponseCode.SUCCESS or resp.body is None:
                        break
                    out.extend(decode_records(resp.body))
                    offset = int(resp.ext("nextBeginOffset") or offset)
    finally:
        await client.close()
    return out


class LoadDriver:
    """Concurrent senders that always target the NameServer's current brokerId 0 and record
    every attempt in a :class:`History` (SEND_OK -> ok; a follower's or not-yet-master's
    SYSTEM_BUSY -> failed; anything else, timeouts included -> unknown)."""

    def __init__(self, ns: str, topic: str, queues: int, history: History) -> None:
        self.ns, self.topic, self.queues, self.history = ns, topic, queues, history
        self.stop = asyncio.Event()
        self.ok_after: dict[str, float] = {}
        self._seq = 0

    async def run(self, senders: int, pause_s: float = 0.0) -> None:
        """Send until :attr:`stop` is set; ``pause_s``: each sender's pause after a SEND_OK
        (0: back to back)."""
        await asyncio.gather(*(self._sender(i, pause_s) for i in range(senders)))

    async def _sender(self, who: int, pause_s: float) -> None:
        client = JavaLikeClient()
        addr: str | None = None
        try:
            while not self.stop.is_set():
                if addr is None:
                    addr = await master_addr(self.ns)
                    if addr is None:
                        await asyncio.sleep(0.1)
                        continue
                self._seq += 1
                key = f"k{who}-{self._seq:06d}"
                queue_id = self._seq % self.queues
                try:
                    resp = await client.send(
                        addr, self.topic, key.encode(), queue_id=queue_id, timeout_s=5.0
                    )
                except (OSError, TimeoutError, RemotingError):
                    self.history.send(key, queue_id, Outcome.UNKNOWN)
                    addr = None
                    await asyncio.sleep(0.05)
                    continue
                if resp.code == ResponseCode.SUCCESS:
                    offset = int(resp.ext("queueOffset") or -1)
                    self.history.send(key, queue_id, Outcome.OK, offset, addr)
                    self.ok_after[addr] = time.monotonic()
                    if pause_s:
                        await asyncio.sleep(pause_s)
                    continue
                outcome = (
                    Outcome.FAILED if resp.code == ResponseCode.SYSTEM_BUSY else Outcome.UNKNOWN
                )
                self.history.send(key, queue_id, outcome)
                addr = None
                await asyncio.sleep(0.05)
        finally:
            await client.close()
