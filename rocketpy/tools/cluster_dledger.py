"""``make cluster MODE=dledger``: a NameServer and one DLedger CommitLog group of three brokers
(RaftNode00 of RaftCluster) on loopback, and ``make cluster-kill-master MODE=dledger``.

Owns: reading ``conf/dledger/broker-n{0,1,2}.conf`` (upstream's samples), rewriting their ports,
peers and store paths for a throwaway directory, starting them after a NameServer through
:func:`rocketpy.tools.cluster.launch` (pids and addresses in ``<dir>/cluster.json``; ``make
cluster-stop`` ends them), printing where each listens, and SIGKILLing the broker the NameServer
lists as the group's brokerId 0. Must not: import daemon packages (it drives them as processes).

Ports: with ``--base-port 9876`` the NameServer listens on 9876, the brokers keep the samples'
``listenPort`` (30911/30921/30931) and DLedger peer ports (40911-40913) shifted by ``base - 9876``;
``--base-port 0`` takes free ports for all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from rocketpy.client.admin import AdminClient
from rocketpy.common.errors import RocketPyError
from rocketpy.common.properties import parse_properties
from rocketpy.tools.children import free_ports
from rocketpy.tools.cluster import (
    BOOT_TIMEOUT_S,
    BROKER_BOOT,
    NAMESRV_BOOT,
    Member,
    Spec,
    _load,
    _reap,
    launch,
    pid_alive,
)

DEFAULT_BASE_PORT = 9876
CONF_DIR = Path(__file__).resolve().parents[2] / "conf" / "dledger"
NODES = ("n0", "n1", "n2")


def group_specs(data: Path, *, base_port: int = DEFAULT_BASE_PORT) -> list[Spec]:
    """A NameServer and the three sample brokers, rewritten for ``data`` and ``base_port``."""
    shift = base_port - DEFAULT_BASE_PORT
    confs = {
        n: parse_properties((CONF_DIR / f"broker-{n}.conf").read_text(encoding="utf-8"))
        for n in NODES
    }
    if base_port:
        peer_ports = [int(confs[n]["dLegerPeers"].split(";")[i].rsplit(":", 1)[1]) + shift
                      for i, n in enumerate(NODES)]  # fmt: skip
        listen = [int(confs[n]["listenPort"]) + shift for n in NODES]
    else:
        peer_ports, listen = free_ports(len(NODES)), [0] * len(NODES)
    peers = ";".join(f"{n}-127.0.0.1:{p}" for n, p in zip(NODES, peer_ports, strict=True))
    specs = [
        Spec(
            "namesrv", "namesrv", "rocketpy.cli.namesrv",
            {"listenPort": str(base_port), "bindAddress": "127.0.0.1",
             "kvConfigPath": str(data / "namesrv" / "kvConfig.json"),
             "configStorePath": str(data / "namesrv" / "namesrv.properties")},
            NAMESRV_BOOT,
        )
    ]  # fmt: skip
    for i, node in enumerate(NODES):
        conf = dict(confs[node])
        root = data / f"broker-{node}" / "store"
        conf.update(
            {
                "brokerIP1": "127.0.0.1",
                "bindAddress": "127.0.0.1",
                "listenPort": str(listen[i]),
                "namesrvAddr": "{namesrv}",
                "storePathRootDir": str(root),
                "storePathCommitLog": str(root / "commitlog"),
                "dLegerPeers": peers,
                "autoCreateTopicEnable": "true",
            }
        )
        specs.append(Spec(f"broker-{node}", "broker", "rocketpy.cli.broker", conf, BROKER_BOOT))
    return specs


def start(directory: Path, base_port: int) -> int:
    """Start a fresh group under ``directory``; print where each daemon listens."""
    members = launch(directory, group_specs(directory / "data", base_port=base_port),
                     "make cluster-stop")  # fmt: skip
    if members is None:
        return 1
    namesrv = ";".join(m.address for m in members if m.role == "namesrv")
    roles = asyncio.run(_broker_ids(namesrv))
    print(f"rocketpy DLedger group RaftNode00 running, data and logs under {directory}")
    for m in members:
        role = m.role
        if m.role == "broker":
            bid = roles.get(m.address)
            role = "master" if bid == 0 else f"slave({bid})" if bid is not None else "electing"
        print(f"  {m.name:<10} {role:<10} {m.address:<22} pid {m.pid:<8} log {m.log}")
    print(f"NAMESRV_ADDR={namesrv}")
    print(f"  try:  bin/mqadmin clusterList -n {namesrv}")
    print("  SEND_OK = the message is in a majority's page cache (2 of 3)")
    print("  stop: make cluster-stop      failover: make cluster-kill-master MODE=dledger")
    return 0


async def _broker_ids(namesrv: str, timeout_s: float = 2.0) -> dict[str, int]:
    """address -> brokerId of every broker the NameServer lists (empty when unreachable)."""
    admin = AdminClient(namesrv, timeout_s=timeout_s)
    try:
        with contextlib.suppress(RocketPyError, OSError):
            info = await admin.cluster_info()
            return {a: bid for b in info.brokers.values() for bid, a in b.broker_addrs.items()}
        return {}
    finally:
        await admin.close()


def kill_master(directory: Path) -> int:
    """SIGKILL the broker the NameServer lists as brokerId 0 of the group."""
    members = _load(directory)
    namesrv = ";".join(m.address for m in members if m.role == "namesrv" and pid_alive(m.pid))
    if not namesrv:
        print(f"no running NameServer recorded under {directory}")
        return 1
    deadline = time.monotonic() + BOOT_TIMEOUT_S  # a fresh group may still be electing
    master: Member | None = None
    while master is None and time.monotonic() < deadline:
        ids = asyncio.run(_broker_ids(namesrv))
        master = next((m for m in members if ids.get(m.address) == 0 and pid_alive(m.pid)), None)
        if master is None:
            time.sleep(0.5)
    if master is None:
        print("no live master listed by the NameServer")
        return 1
    os.kill(master.pid, signal.SIGKILL)
    _reap(master.pid)
    print(f"killed master {master.name} at {master.address} (pid {master.pid}); a follower")
    print(f"takes over within ~10 s; watch with  bin/mqadmin clusterList -n {namesrv}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m rocketpy.tools.cluster_dledger start|kill-master --dir DIR``."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.cluster_dledger", description=__doc__)
    parser.add_argument("action", choices=("start", "kill-master"))
    parser.add_argument("--dir", type=Path, default=Path(".cluster"))
    parser.add_argument("--base-port", type=int, default=int(os.environ.get("BASE_PORT", "9876")))
    args = parser.parse_args(argv)
    directory = args.dir.resolve()
    if args.action == "start":
        return start(directory, args.base_port)
    return kill_master(directory)


if __name__ == "__main__":
    sys.exit(main())
