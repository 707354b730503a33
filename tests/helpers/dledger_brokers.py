"""Three ``mqbroker`` processes of one DLedger CommitLog group on loopback (dledger-commitlog.md
section 6's setup): free peer ports, per-node stores, NameServer view of the group."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field
from pathlib import Path

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.common.codes import ResponseCode
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.processes import Daemon, start_broker

CLUSTER = "RaftCluster"
GROUP = "RaftNode00"
NODES = ("n0", "n1", "n2")


def free_ports(count: int) -> list[int]:
    """Ports free now (bound and released): the static ``dLegerPeers`` list needs them before
    any member starts."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class DLedgerGroup:
    """The three brokers of :data:`GROUP`; ``daemons``/``addrs`` by self id."""

    tmp: Path
    namesrv: str
    peers: str
    extra: str = ""
    daemons: dict[str, Daemon] = field(default_factory=dict)
    addrs: dict[str, str] = field(default_factory=dict)

    def start(self, node: str) -> str:
        """Start (or restart, on its store) broker ``node``; return its address."""
        extra = (
            f"brokerClusterName={CLUSTER}\nenableDLegerCommitLog=true\ndLegerGroup={GROUP}\n"
            f"dLegerPeers={self.peers}\ndLegerSelfId={node}\nsendMessageThreadPoolNums=16\n"
            f"{self.extra}"
        )
        daemon, addr = start_broker(
            self.tmp, self.namesrv, name=GROUP, tag=node, store=self.tmp / node, extra=extra
        )
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
