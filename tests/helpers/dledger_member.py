"""Three DLedger 0.3.1.2 members (rocketpy.dledger.commitlog_member) in-process on loopback: real
sockets on preallocated ports, short timings (150 ms heartbeats, 50-150 ms vote intervals),
small data files."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from pathlib import Path
from typing import Any

from rocketpy.common.aio import wait_until
from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig
from rocketpy.dledger.commitlog_member.member import DLedgerMember
from rocketpy.dledger.commitlog_member.state import Role
from rocketpy.tools.children import free_ports

IDS = ("n0", "n1", "n2")


class Group:
    """Members by id; stopped ones can be restarted from their files."""

    def __init__(self, root: Path, **overrides: Any) -> None:
        ports = free_ports(len(IDS))
        peers = ";".join(f"{i}-127.0.0.1:{p}" for i, p in zip(IDS, ports, strict=True))
        base = DLedgerMemberConfig(
            group="RaftNode00",
            self_id="n0",
            peers=peers,
            store_base_dir=root,
            heart_beat_time_interval_ms=150,
            max_heart_beat_leak=3,
            min_vote_interval_ms=50,
            max_vote_interval_ms=150,
            vote_wait_base_ms=300,
            max_push_timeout_ms=300,
            max_wait_ack_time_ms=1000,
            rpc_timeout_ms=1000,
            check_point_interval_ms=200,
            data_file_size=64 * 1024,
            index_file_size=32 * 1024,
        )
        self.configs = {
            i: dataclasses.replace(base, self_id=i, store_base_dir=root / i, **overrides.get(i, {}))
            for i in IDS
        }
        self.members: dict[str, DLedgerMember] = {}
        self._seed = 0

    async def start(self, member_id: str) -> DLedgerMember:
        self._seed += 1
        m = DLedgerMember(self.configs[member_id], rng=random.Random(self._seed))
        await m.start()
        self.members[member_id] = m
        return m

    async def stop(self, member_id: str) -> None:
        m = self.members.pop(member_id)
        async with asyncio.timeout(10):
            await m.shutdown()

    async def close(self) -> None:
        for i in list(self.members):
            await self.stop(i)

    def leaders(self) -> list[DLedgerMember]:
        return [m for m in self.members.values() if m.role is Role.LEADER]

    async def wait_leader(self, timeout_s: float = 10.0) -> DLedgerMember:
        """One leader whose term every running member follows."""

        def settled() -> bool:
            ls = self.leaders()
            if len(ls) != 1:
                return False
            return all(
                m.role is Role.LEADER
                or (m.role is Role.FOLLOWER and m.leader_id == ls[0].config.self_id)
                for m in self.members.values()
            )

        await wait_until(settled, timeout_s)
        return self.leaders()[0]
