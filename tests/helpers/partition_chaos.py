"""Network partitions against a controller-mode broker-set (issue 25, item 5; scenarios F-01,
F-04, F-05 of acceptance-scenarios.md), an unreachable controller follower (C-15) and slow
followers (F-08, H-09).

:class:`PartitionRun` is the chaos run of tests/helpers/chaos_cluster.py with every daemon in a
host of its own (tests/helpers/netlab.py): the NameServer ``ns``, controllers ``n0``-``n2``,
brokers ``b1``-``b3``; the producers, the final reader and the observer are the client host.
Each round cuts links (:class:`Cut`), holds the cut for a while (until a failover where one is
expected, or a seeded time), heals, and waits for the recovery of every chaos round. The history
checker judges the run as usual; two more checks are specific to partitions:

* a minority never changes state: a controller cut off from the other two is asked for broker-a's
  state all through the cut (the client can still reach it); any answer that differs from its
  first one is a ``minority`` violation;
* a cut that leaves the master in touch with a majority of the controllers and with its slaves
  (the client cut from the master, a slave cut off, a controller follower cut off, both slaves
  slow) must not elect anybody: a new master epoch is a ``flap`` violation;
* a controller follower cut off (its connections hang: C-15) blocks nobody: a gap between
  SEND_OKs over BLOCKED_LIMIT_S while the cut holds is a ``blocked`` violation;
* slow slaves (what the master sends both is throttled): no gap between SEND_OKs over
  SHRINK_LIMIT_S while the throttle holds, and none over STALL_LIMIT_S after a shrink to the
  master alone (``stall``: H-09's "INDETERMINATE sends stop after that window"). Whether the
  slaves fall behind for longer than ``haMaxTimeSlaveNotCatchup`` depends on the load: allAck
  holds the producers to the slaves' pace, and on a busy host they keep up (seen in CI), so
  the shrink is reported when it happens, not required. After the heal both rejoin, as after
  every round.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from enum import StrEnum
from pathlib import Path

from rocketpy.common.errors import RemotingError
from tests.helpers.chaos_cluster import (
    ALL,
    FAILOVER_TIMEOUT_S,
    ChaosReport,
    ChaosRun,
    Fault,
    RoundResult,
)
from tests.helpers.controller_mode import controller_leader, sync_state
from tests.helpers.history import Violation
from tests.helpers.netlab import CLIENT, NetLab

#: H-09's bound on the shrink: T_catchup (haMaxTimeSlaveNotCatchup, 15 s by default) plus two
#: SyncStateSet checks (checkSyncStateSetPeriod 500 ms here), with room for a busy host.
SHRINK_LIMIT_S = 15.0 + 2 * 0.5 + 4.0
#: After the shrink, the longest wait for the next SEND_OK (a send in flight may still time out
#: waiting for the slaves it began with: the client's timeout is 3 s).
STALL_LIMIT_S = 6.0
#: C-15: the longest gap between SEND_OKs allowed while a controller follower is cut off.
BLOCKED_LIMIT_S = 2.0

HOSTS = ("ns", "n0", "n1", "n2", "b1", "b2", "b3")
CONTROLLERS = ("n0", "n1", "n2")


class Cut(StrEnum):
    """One kind of partition a round makes."""

    # The master loses the controllers but keeps its slaves, the NameServer and the clients.
    MASTER_FROM_CONTROLLERS = "cut-master-from-controllers"
    # A slave loses everybody.
    SLAVE_OFF = "cut-slave-off"
    # The controller leader loses the other controllers and every broker (the client still
    # reaches it: it is asked for its state all along).
    CONTROLLER_LEADER_OFF = "cut-controller-leader-off"
    # The client loses the master only.
    CLIENT_FROM_MASTER = "cut-client-from-master"
    # F-01: {master, controller leader} | {the other controllers, both slaves}.
    MINORITY_MASTER = "cut-master+leader-from-majority"
    # F-04: {master, one slave} | {controllers, the other slave}.
    MASTER_WITH_SLAVE = "cut-master+slave-from-controllers+slave"
    # F-05: only the link between the master and the controller leader.
    MASTER_LEADER_LINK = "cut-master-leader-link"
    # C-15: a controller other than the leader loses every other host but the client.
    CONTROLLER_FOLLOWER_OFF = "cut-controller-follower-off"
    # F-08 / H-09: what the master sends both slaves is throttled (netlab.THROTTLE_RATE).
    SLOW_SLAVES = "slow-slaves"


#: How long after a cut-off controller follower is healed its leader must still lead: a
#: campaign of the healed one would move the others to its term within a vote interval.
REJOIN_SETTLE_S = 2.0
#: Cuts after which the controllers must elect another master.
FAILOVER_CUTS = frozenset({Cut.MINORITY_MASTER, Cut.MASTER_WITH_SLAVE})
#: The longest gap between SEND_OKs while a cut holds, and the violation past it.
GAP_LIMITS: dict[Cut, tuple[float, str]] = {
    Cut.CONTROLLER_FOLLOWER_OFF: (BLOCKED_LIMIT_S, "blocked"),
    Cut.SLOW_SLAVES: (SHRINK_LIMIT_S, "stall"),
}
#: Cuts after which nobody may be elected.
STEADY_CUTS = frozenset({
    Cut.CLIENT_FROM_MASTER, Cut.SLAVE_OFF, Cut.CONTROLLER_LEADER_OFF,
    Cut.CONTROLLER_FOLLOWER_OFF, Cut.SLOW_SLAVES,
})  # fmt: skip


class PartitionRun(ChaosRun):
    """A chaos run whose rounds cut links (or, with ``faults``, also kill and pause)."""

    def __init__(self, tmp: Path, seed: int, net: NetLab) -> None:
        super().__init__(tmp, seed, net=net)
        self.lab = net
        self._minority: set[int] = set()  # controller indexes cut from the other two

    def _live_controllers(self) -> list[str]:
        # A controller on the minority side is stale (or unreachable): ask the majority.
        live = super()._live_controllers()
        cut = {self.controller_addrs[i] for i in self._minority}
        return [a for a in live if a not in cut]

    async def run_mixed(self, rounds: int, kinds: list[Cut | Fault] | None) -> ChaosReport:
        """``rounds`` rounds of ``kinds`` in turn (else random cuts, kills and pauses), then
        the checks of every chaos run."""
        every: list[Cut | Fault] = [*Cut, *Fault]

        async def play(i: int) -> RoundResult:
            kind = kinds[i % len(kinds)] if kinds else self.rng.choice(every)
            if isinstance(kind, Cut):
                return await self.run_cut(kind)
            return await self.run_round(kind)

        return await self.campaign(rounds, play)

    async def _leader(self) -> int:
        return await self._leader_index()

    async def _watch_minority(self, index: int, stop: asyncio.Event) -> int:
        """Ask controller ``index`` (cut from the other two) for broker-a's state until
        ``stop``; record a violation if what it answers ever changes. Returns how many times
        it answered (it answers while it still takes itself for the leader)."""
        addr = self.controller_addrs[index]
        first: object = None
        answers = 0
        while not stop.is_set():
            with contextlib.suppress(RemotingError, TimeoutError):
                async with asyncio.timeout(2):
                    state = await sync_state([addr])
                answers += 1
                if first is None:
                    first = state
                elif state != first:
                    self.report.violations.append(
                        Violation("minority", f"cut-off controller n{index}: {first} -> {state}")
                    )
                    break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.2):
                    await stop.wait()
        return answers

    async def _check_leader_kept(self, leader: int) -> None:
        """A healed controller that was cut off alone must follow the leader it left, not
        unseat it: after a vote round's worth of time the leader is still controller
        ``leader`` (else a ``churn`` violation)."""
        await asyncio.sleep(REJOIN_SETTLE_S)
        now = await self._leader()
        if now != leader:
            self.report.violations.append(
                Violation("churn", f"healed follower: controller leader n{leader} -> n{now}")
            )

    async def _wait_new_leader(self, old: int, limit_s: float) -> None:
        """Until the majority names a leader other than controller ``old`` (or ``limit_s``)."""
        others = [a for i, a in enumerate(self.controller_addrs) if i != old]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit_s):
                while True:
                    leader = await controller_leader(others)
                    if leader is not None and leader != self.controller_addrs[old]:
                        return
                    await asyncio.sleep(0.1)

    def _cut(self, cut: Cut, master: int, slave: int, leader: int) -> tuple[str, ...]:
        """Make the cut; return the hosts it separates from the rest (for the log)."""
        m, s, n = f"b{master}", f"b{slave}", f"n{leader}"
        others = [f"b{b}" for b in sorted(ALL - {master})]
        if cut is Cut.MASTER_FROM_CONTROLLERS:
            self.lab.partition([m], CONTROLLERS)
            return (m,)
        if cut is Cut.SLAVE_OFF:
            self.lab.isolate(s)
            return (s,)
        if cut in (Cut.CONTROLLER_LEADER_OFF, Cut.CONTROLLER_FOLLOWER_OFF):
            index = (
                leader
                if cut is Cut.CONTROLLER_LEADER_OFF
                else self.rng.choice([i for i in range(len(CONTROLLERS)) if i != leader])
            )
            self._minority = {index}
            self.lab.isolate(f"n{index}", keep=[CLIENT])
            return (f"n{index}",)
        if cut is Cut.CLIENT_FROM_MASTER:
            self.lab.cut(CLIENT, m)
            return (CLIENT, m)
        if cut is Cut.MINORITY_MASTER:
            self._minority = {leader}
            rest = [c for c in CONTROLLERS if c != n]
            self.lab.partition([m, n], [*rest, *others])
            return (m, n)
        if cut is Cut.MASTER_WITH_SLAVE:
            rest = [b for b in others if b != s]
            self.lab.partition([m, s], [*CONTROLLERS, *rest])
            return (m, s)
        if cut is Cut.SLOW_SLAVES:
            for slave_host in others:
                self.lab.throttle(m, slave_host)
            return tuple(others)
        self.lab.cut(m, n)  # MASTER_LEADER_LINK
        return (m, n)

    async def _slow_slaves(self, master: int, began: float) -> float | None:
        """Watch for the shrink to the master alone for SHRINK_LIMIT_S; after one, a SEND_OK
        must follow within STALL_LIMIT_S (H-09). The seconds the shrink took, or None."""
        shrunk: float | None = None
        while time.monotonic() - began < SHRINK_LIMIT_S:
            with contextlib.suppress(RemotingError):
                if (await sync_state(self._live_controllers()))[2] == {master}:
                    shrunk = time.monotonic()
                    break
            await asyncio.sleep(0.1)
        if shrunk is None:
            return None  # the slaves kept up with what allAck let the producers send
        mark = self._ok_count
        while self._ok_count == mark and time.monotonic() - shrunk < STALL_LIMIT_S:
            await asyncio.sleep(0.05)
        if self._ok_count == mark:
            self.report.violations.append(Violation(
                "stall", f"{Cut.SLOW_SLAVES}: no SEND_OK within {STALL_LIMIT_S}s of the shrink "
                f"({shrunk - began:.1f}s after the throttle)",
            ))  # fmt: skip
        return shrunk - began

    async def run_cut(self, cut: Cut) -> RoundResult:
        """Make ``cut``, hold it, heal it, and wait until the cluster has recovered."""
        master, epoch, _ = await self._state()
        assert master is not None
        slave = self.rng.choice(sorted(ALL - {master}))
        leader = await self._leader()
        began = time.monotonic()
        victims = self._cut(cut, master, slave, leader)
        stop = asyncio.Event()
        watchers = [
            asyncio.create_task(self._watch_minority(i, stop), name=f"watch-n{i}")
            for i in sorted(self._minority)
        ]
        failover: float | None = None
        shrink: float | None = None
        answers: list[int] = []
        try:
            if cut in FAILOVER_CUTS or cut in (Cut.MASTER_FROM_CONTROLLERS, Cut.MASTER_LEADER_LINK):
                # Held until another master is elected (required for FAILOVER_CUTS, allowed
                # for the others) or the failover deadline, then a little longer.
                failover = await self._wait_failover(master, epoch, began)
                if failover is None and cut in FAILOVER_CUTS:
                    self.report.violations.append(
                        Violation("no-failover", f"{cut}: nobody elected in {FAILOVER_TIMEOUT_S}s")
                    )
            elif cut is Cut.CONTROLLER_LEADER_OFF:
                await self._wait_new_leader(leader, FAILOVER_TIMEOUT_S)
            elif cut is Cut.SLOW_SLAVES:
                shrink = await self._slow_slaves(master, began)
            await self._hold(1.0, 4.0)
            limit, kind = GAP_LIMITS.get(cut, (None, ""))
            if limit is not None and (gap := self.outage(began)) > limit:
                self.report.violations.append(
                    Violation(kind, f"{cut}: no SEND_OK for {gap:.2f}s while the cut held")
                )
            if cut in STEADY_CUTS:
                now_master, now_epoch, _ = await self._state()
                if now_epoch != epoch:
                    self.report.violations.append(
                        Violation(
                            "flap",
                            f"{cut}: master b{master} epoch {epoch} -> b{now_master} "
                            f"epoch {now_epoch}",
                        )
                    )
        finally:
            stop.set()
            answers = list(await asyncio.gather(*watchers))
            self.lab.heal()
            self._minority = set()
        await self.wait_recovered()
        if cut is Cut.CONTROLLER_FOLLOWER_OFF:
            await self._check_leader_kept(leader)
        note = f"cut-off controller answered {answers[0]} times" if answers else ""
        if shrink is not None:
            note = f"SyncStateSet shrank to the master in {shrink:.1f}s"
        result = RoundResult(
            cut, victims, failover, time.monotonic() - began, self.outage(began), note
        )
        self.report.rounds.append(result)
        return result
