"""``make bench-controller`` (part 2): failover times of a real three-process controller group.

Owns: one run. It starts three ``mqcontroller`` processes on free loopback ports with test
timings (Raft heartbeat ``--raft-heartbeat-ms``, election timeout ``--election-timeout-ms``;
brokers' heartbeat timeout ``--broker-timeout-ms``, 1 s by default), joins two replicas of
``broker-a`` through the persistent-id flow (GET_NEXT_BROKER_ID, APPLY_BROKER_ID, REGISTER),
elects replica 1 and puts both in the SyncStateSet, then measures (1) broker-master re-election:
replica 1's heartbeats stop, until the leader reports replica 2 as master; (2) controller-group
failover: the leader process is SIGKILLed, until a survivor serves as leader and still reports
master 2. Repeated ``--rounds`` times; prints each and the worst. Must not: be used as a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.bodies.controller import SyncStateSet, encode_body
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import to_ext
from rocketpy.remoting.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.tools.children import Child, free_ports, spawn, stop

CLUSTER, BROKER = "BenchCluster", "broker-a"
BOOT = re.compile(r"The Controller Server boot success\. serializeType=\w+, address (\S+)")


def _start_group(args: argparse.Namespace, work: Path) -> list[Child]:
    ports = free_ports(3)
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
    group: list[Child] = []
    for i in range(3):
        conf = work / f"n{i}.conf"
        conf.write_text(
            f"controllerDLegerGroup=bench\ncontrollerDLegerPeers={peers}\n"
            f"controllerDLegerSelfId=n{i}\ncontrollerStorePath={work / f'n{i}'}\n"
            f"configStorePath={work / f'n{i}' / 'controller.properties'}\n"
            f"controllerDLegerHeartBeatTimeIntervalMs={args.raft_heartbeat_ms}\n"
            f"controllerDLegerElectionTimeoutMs={args.election_timeout_ms}\n"
            "scanNotActiveBrokerInterval=100\nscanInactiveMasterInterval=100\n"
            "controllerStartupGraceMs=0\n",
            encoding="utf-8",
        )
        try:
            group.append(
                spawn(["-m", "rocketpy.cli.controller", "-c", str(conf)], BOOT, work, f"n{i}")
            )
        except RuntimeError:
            for started in group:
                stop(started)
            raise
    return group


class _Replica:
    """One replica of broker-a speaking the controller protocol as a 5.x broker does."""

    def __init__(self, client: RemotingClient, broker_id: int, port: int) -> None:
        self.client = client
        self.broker_id = broker_id
        self.address = f"127.0.0.1:{port}"

    async def call(
        self, addr: str, code: int, header: object | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        ext = to_ext(header) if header is not None else None
        return await self.client.invoke(addr, RemotingCommand.request(code, ext, body), 3.0)

    async def join(self, leader: str) -> None:
        nxt = GetNextBrokerIdRequestHeader(cluster_name=CLUSTER, broker_name=BROKER)
        await self.call(leader, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, nxt)
        apply = ApplyBrokerIdRequestHeader(
            cluster_name=CLUSTER,
            broker_name=BROKER,
            applied_broker_id=self.broker_id,
            register_check_code=f"{self.address};{int(time.time() * 1000)}",
        )
        for code, hdr in (
            (RequestCode.CONTROLLER_APPLY_BROKER_ID, apply),
            (
                RequestCode.CONTROLLER_REGISTER_BROKER,
                RegisterBrokerToControllerRequestHeader(
                    cluster_name=CLUSTER,
                    broker_name=BROKER,
                    broker_id=self.broker_id,
                    broker_address=self.address,
                ),
            ),
        ):
            resp = await self.call(leader, code, hdr)
            if resp.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"request {code} failed: {resp.code} {resp.remark}")

    async def beat(self, controllers: list[str], timeout_ms: int) -> None:
        hdr = BrokerHeartbeatRequestHeader(
            cluster_name=CLUSTER,
            broker_addr=self.address,
            broker_name=BROKER,
            broker_id=self.broker_id,
            epoch=0,
            max_offset=0,
            confirm_offset=0,
            heartbeat_timeout_mills=timeout_ms,
        )
        while True:
            for addr in controllers:
                req = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, to_ext(hdr))
                # A killed controller must not stop the beat.
                with contextlib.suppress(Exception):
                    await self.client.invoke_oneway(addr, req)
            await asyncio.sleep(timeout_ms / 5000)


async def _leader(client: RemotingClient, addrs: list[str], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for addr in addrs:
            with contextlib.suppress(Exception):
                req = RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO)
                resp = await client.invoke(addr, req, 1.0)
                leader = resp.ext("controllerLeaderAddress")
                if resp.ext("isLeader") == "true" and leader == addr:
                    # Serving: a write-path read answers (not 2007 "not in leader state").
                    probe = GetReplicaInfoRequestHeader(broker_name=BROKER)
                    got = await client.invoke(
                        addr,
                        RemotingCommand.request(
                            RequestCode.CONTROLLER_GET_REPLICA_INFO, to_ext(probe)
                        ),
                        1.0,
                    )
                    if got.code != ResponseCode.CONTROLLER_NOT_LEADER:
                        return addr
        await asyncio.sleep(0.02)
    raise RuntimeError(f"no serving leader within {timeout_s} s")


async def _master(client: RemotingClient, leader: str) -> str | None:
    hdr = GetReplicaInfoRequestHeader(broker_name=BROKER)
    resp = await client.invoke(
        leader, RemotingCommand.request(RequestCode.CONTROLLER_GET_REPLICA_INFO, to_ext(hdr)), 1.0
    )
    return resp.ext("masterBrokerId")


async def _until_master(client: RemotingClient, leader: str, master: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while (now := await _master(client, leader)) != master:
        if time.monotonic() > deadline:
            raise RuntimeError(f"master still {now} after {timeout_s} s")
        await asyncio.sleep(0.01)


async def _round(args: argparse.Namespace, work: Path) -> tuple[float, float]:
    group = _start_group(args, work)
    client = RemotingClient(name="bench-controller")
    tasks: list[asyncio.Task[None]] = []
    clients: list[RemotingClient] = []
    try:
        addrs = [c.booted for c in group]
        leader = await _leader(client, addrs, 30)
        # Each replica its own connection, as brokers have: the controller closes an expired
        # broker's channel, which must not take the other replica's heartbeats with it.
        clients = [RemotingClient(name=f"replica-{i}") for i in (1, 2)]
        r1, r2 = (_Replica(c, i, p) for c, i, p in zip(clients, (1, 2), free_ports(2), strict=True))
        for r in (r1, r2):
            await r.join(leader)
            tasks.append(asyncio.create_task(r.beat(addrs, args.broker_timeout_ms)))
        elect = ElectMasterRequestHeader.of_broker_trigger(CLUSTER, BROKER, 1)
        await r1.call(leader, RequestCode.CONTROLLER_ELECT_MASTER, elect)
        alter = AlterSyncStateSetRequestHeader(
            broker_name=BROKER, master_broker_id=1, master_epoch=1
        )
        body = encode_body(SyncStateSet(sync_state_set=frozenset({1, 2}), sync_state_set_epoch=1))
        resp = await r1.call(leader, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, alter, body)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"alter sync state set failed: {resp.code} {resp.remark}")
        tasks[0].cancel()  # replica 1 (master) goes silent
        started = time.monotonic()
        await _until_master(client, leader, "2", 30.0)
        reelect = time.monotonic() - started
        killed = next(c for c in group if c.booted == leader)
        killed.proc.send_signal(signal.SIGKILL)
        started = time.monotonic()
        survivors = [a for a in addrs if a != leader]
        new_leader = await _leader(client, survivors, 30)
        failover = time.monotonic() - started
        if await _master(client, new_leader) != "2":
            raise RuntimeError("the new controller leader lost the election result")
        return reelect, failover
    finally:
        for t in tasks:
            t.cancel()
        for rc in (client, *clients):
            await rc.close()
        for c in group:
            stop(c)


def main(argv: list[str] | None = None) -> int:
    """Run ``--rounds`` rounds; print each and the worst."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.bench_controller", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--raft-heartbeat-ms", type=int, default=300)
    parser.add_argument("--election-timeout-ms", type=int, default=1000)
    parser.add_argument("--broker-timeout-ms", type=int, default=1000)
    args = parser.parse_args(argv)
    results = []
    for n in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="rocketpy-bench-controller-") as tmp:
            reelect, failover = asyncio.run(_round(args, Path(tmp)))
        results.append((reelect, failover))
        print(
            f"round {n + 1}: broker-master re-election {reelect:.2f} s after its last heartbeat"
            f" (timeout {args.broker_timeout_ms} ms); controller leader failover {failover:.2f} s"
            f" after SIGKILL (election timeout {args.election_timeout_ms} ms)",
            flush=True,
        )
    print(
        f"worst of {args.rounds}: re-election {max(r for r, _ in results):.2f} s (aim < 5 s), "
        f"controller failover {max(f for _, f in results):.2f} s (aim < 3 s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
