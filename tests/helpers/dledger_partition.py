"""Network partitions against one DLedger CommitLog group (issue 22: "never lost ... not by a
network partition"; dledger-commitlog.md section 3 election, section 6 checks 4-6).

:class:`DLedgerPartitionRun` is the crash-chaos run of tests/helpers/dledger_chaos.py with every
daemon in a host of its own (tests/helpers/netlab.py): the NameServer ``ns`` and brokers
``n0``-``n2`` (peer port :data:`~tests.helpers.dledger_chaos.PEER_PORT` on each host's address);
the producers, the live consumer and the final reader are the client host. Each round cuts links
(:class:`Cut`), holds the cut, heals it, and recovers as every crash round does (a master with
both slaves listed, a SEND_OK, the committed data and index files byte-identical on the three).
The history checker judges the whole run. Checks specific to partitions, while the cut holds:

* ``minority``: no send begun after the leader lost both followers (scenario (a), or a random
  split leaving it alone) is acknowledged by it (it can reach no quorum), and it steps down (its
  DLedger METADATA names no leader, or another) within :data:`STEP_DOWN_LIMIT_S`, section 6
  check 6's bound with room for a busy host (when the client can still ask it);
* ``failover``: in (a) the two followers elect a leader that acknowledges within
  FAILOVER_LIMIT_S;
* ``rejoin``: after the heal the old leader is a follower of the new one (its uncommitted tail is
  truncated: the byte-identity check compares it up to the committed end);
* ``flap``: a cut that leaves the leader with a follower (and so a Raft majority) must elect
  nobody: every member the client can still reach on the leader's side names the same leader
  all through the cut (a throttled follower aside: it may stand as a candidate), and the
  leader's term at the end of the cut is its term before it;
* ``stall``: where the client still reaches that leader, SEND_OKs keep coming (no gap longer than
  :data:`STALL_LIMIT_S`).

And before every cut, ``settle``: within FAILOVER_LIMIT_S every member's METADATA names the
listed leader (a member left behind by the previous round, never following again, shows here).

Must not: mock any layer, or read the members' state other than over their peer port's METADATA
(what a Java DLedger client sees) and the crash chaos's raw-file comparison.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from rocketpy.common.errors import CodecError, RemotingError
from rocketpy.dledger.commitlog_member.protocol import (
    MetadataRequest,
    MetadataResponse,
    decode_body,
    encode_body,
)
from rocketpy.dledger.transport import DLedgerRequestCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from tests.helpers.dledger_brokers import GROUP, NODES
from tests.helpers.dledger_chaos import (
    FAILOVER_LIMIT_S,
    PEER_PORT,
    DLedgerChaosRun,
    DLedgerReport,
    Fault,
    RoundResult,
)
from tests.helpers.history import Violation
from tests.helpers.netlab import CLIENT, NetLab

HOSTS = ("ns", *NODES)
#: Section 6 check 6: a leader without a quorum steps down within ~8 s (no quorum of heartbeat
#: answers for 6 s, checked every 2 s heartbeat); 2 s more for a 2-core host under load.
STEP_DOWN_LIMIT_S = 10.0
#: The longest gap between SEND_OKs while the client reaches a leader with a majority.
STALL_LIMIT_S = 5.0
#: The share of random rounds that cut links (the others crash, pause or restart members).
CUT_SHARE = 2 / 3
_PROBE_TIMEOUT_S = 1.0
_PROBE_EVERY_S = 0.25
_DLEDGER_OK = 200  # the remoting code of every DLedger peer answer (rpc.py)


class Cut(StrEnum):
    """One kind of partition a round makes."""

    # (a) The leader loses both followers; it keeps the NameServer and the clients.
    LEADER_OFF = "cut-leader-from-followers"
    # (b) One follower loses everybody.
    FOLLOWER_OFF = "cut-follower-off"
    # (c) The client loses the leader only.
    CLIENT_FROM_LEADER = "cut-client-from-leader"
    # (d) {leader, one follower, client} | {the other follower, NameServer}.
    SPLIT = "split-leader+follower+client|follower+ns"
    # (e) F-08 for a DLedger group: what the leader sends one follower is throttled
    # (netlab.THROTTLE_RATE, the same connection carries its pushes and heartbeats).
    SLOW_FOLLOWER = "slow-follower"
    # Random rounds: a seeded side of {client, NameServer, n0, n1, n2} against the rest.
    RANDOM = "random-split"


#: The named scenarios (a)-(e), in order.
NAMED_CUTS = (
    Cut.LEADER_OFF,
    Cut.FOLLOWER_OFF,
    Cut.CLIENT_FROM_LEADER,
    Cut.SPLIT,
    Cut.SLOW_FOLLOWER,
)


#: Cuts that leave the leader a Raft majority: nobody may be elected while they hold.
STEADY_CUTS = frozenset({Cut.FOLLOWER_OFF, Cut.CLIENT_FROM_LEADER, Cut.SPLIT, Cut.SLOW_FOLLOWER})
#: Steady cuts where the client still reaches the leader: sends keep succeeding.
SERVING_CUTS = frozenset({Cut.FOLLOWER_OFF, Cut.SPLIT, Cut.SLOW_FOLLOWER})


async def metadata_leader(client: RemotingClient, addr: str, node: str) -> str | None:
    """The leader member ``node`` (peer port ``addr``) names in its METADATA answer; "" when it
    names none; None when it does not answer within a second."""
    meta = await metadata(client, addr, node)
    return None if meta is None else meta.leader_id or ""


async def metadata(client: RemotingClient, addr: str, node: str) -> MetadataResponse | None:
    """Member ``node``'s METADATA answer (peer port ``addr``); None when it does not answer
    within a second."""
    req = RemotingCommand.request(
        DLedgerRequestCode.METADATA, None, encode_body(MetadataRequest(group=GROUP, remote_id=node))
    )
    try:
        reply = await client.invoke(addr, req, _PROBE_TIMEOUT_S)
    except (RemotingError, TimeoutError, OSError):
        return None
    if reply.code != _DLEDGER_OK or not reply.body:
        return None
    try:
        return decode_body(reply.body, MetadataResponse)
    except CodecError:
        return None


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a cut leaves where."""

    victims: tuple[str, ...]  # the hosts it separates from the rest (for the log)
    minority: bool  # the leader keeps fewer than two members
    watched: list[str]  # members the client can still ask, on the leader's side


class DLedgerPartitionRun(DLedgerChaosRun):
    """A DLedger chaos run whose rounds cut links (or, in random rounds, also crash members)."""

    def __init__(self, tmp: Path, seed: int, net: NetLab) -> None:
        super().__init__(tmp, seed, net=net)
        self.lab = net
        self._probe = RemotingClient()

    def stop(self) -> None:
        """Heal every link, then stop the daemons (a cut broker could not unregister)."""
        self.lab.heal()
        super().stop()

    def _peer(self, node: str) -> str:
        return f"{self.lab.ip[node]}:{PEER_PORT}"

    async def run_mixed(self, rounds: int, kinds: list[Cut | Fault] | None) -> DLedgerReport:
        """``rounds`` rounds of ``kinds`` in turn (else seeded random ones: a cut two times in
        three, else a crash fault), then the final checks of every DLedger chaos run."""

        async def play(i: int) -> RoundResult:
            if kinds:
                kind: Cut | Fault = kinds[i % len(kinds)]
            elif self.rng.random() < CUT_SHARE:
                kind = self.rng.choice(list(Cut))
            else:
                kind = self.rng.choice(list(Fault))
            if isinstance(kind, Cut):
                return await self.run_cut(kind)
            return await self.run_round(kind)

        try:
            return await self.campaign(rounds, play)
        finally:
            await self._probe.close()

    def _cut(self, cut: Cut, leader: str) -> _Plan:
        """Make the cut; say what it leaves where."""
        others = [n for n in NODES if n != leader]
        follower = self.rng.choice(others)
        kept = [n for n in others if n != follower]
        if cut is Cut.LEADER_OFF:
            self.lab.partition([leader], others)
            return _Plan((leader,), minority=True, watched=[leader])
        if cut is Cut.FOLLOWER_OFF:
            self.lab.isolate(follower)
            return _Plan((follower,), minority=False, watched=[leader, *kept])
        if cut is Cut.CLIENT_FROM_LEADER:
            self.lab.cut(CLIENT, leader)
            return _Plan((CLIENT, leader), minority=False, watched=others)
        if cut is Cut.SLOW_FOLLOWER:
            # The slow follower itself is not watched: its heartbeats queue behind the pushes
            # on the one connection (as upstream's), so it may stand as a candidate; it must
            # not unseat the leader (the leader's term is checked after the cut).
            self.lab.throttle(leader, follower)
            return _Plan((follower,), minority=False, watched=[leader, *kept])
        if cut is Cut.SPLIT:
            self.lab.partition([leader, *kept, CLIENT], [follower, "ns"])
            return _Plan((follower, "ns"), minority=False, watched=[leader, *kept])
        hosts = [CLIENT, "ns", *NODES]  # RANDOM: a seeded side against the rest
        side = {h for h in hosts if self.rng.random() < 0.5}
        if len(side) in (0, len(hosts)):
            side = {leader}
        rest = [h for h in hosts if h not in side]
        self.lab.partition(sorted(side), rest)
        mine = side if leader in side else set(rest)
        # The client can probe only the members on its own side.
        seen = [n for n in NODES if n in mine] if CLIENT in mine else []
        return _Plan(tuple(sorted(side)), minority=sum(n in mine for n in NODES) < 2, watched=seen)

    async def run_cut(self, cut: Cut) -> RoundResult:
        """Make ``cut``, check it while it holds, heal it, and wait until the group recovered."""
        leader = await self._settled()
        old = self.g.addrs[leader]
        truncated = self.g.daemons[leader].output().count("dledger truncated")
        term = await self._term(leader)
        began = time.monotonic()
        plan = self._cut(cut, leader)
        failover: float | None = None
        try:
            if plan.minority:
                failover = await self._minority_leader(cut, leader, plan, began)
            else:
                await self._steady(cut, leader, plan.watched, began)
                await self._same_term(cut, leader, term)
        finally:
            healed = time.monotonic()
            self.lab.heal()
        if plan.minority:
            self._no_ok_from(old, began, healed)
        if cut is Cut.LEADER_OFF:
            await self._rejoined(leader)
            now = self.g.daemons[leader].output().count("dledger truncated") - truncated
            print(f"  old leader {leader}: {now} truncation(s) after the heal", flush=True)
        return await self.recover(cut, plan.victims, failover, began)

    async def _settled(self) -> str:
        """The leader, once the NameServer lists it with both slaves and every member's METADATA
        names it (a follower may still be a candidate after a restart or a heal: a cut made then
        would blame the cut for it)."""
        named: dict[str, str | None] = {}
        leader = ""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FAILOVER_LIMIT_S):
                while True:
                    leader = await self._leader()
                    named = {n: await metadata_leader(self._probe, self._peer(n), n) for n in NODES}
                    if set(named.values()) == {leader}:
                        return leader
                    await asyncio.sleep(_PROBE_EVERY_S)
        self.report.violations.append(
            Violation("settle", f"{FAILOVER_LIMIT_S}s after {leader} was listed: {named}")
        )
        return leader

    async def _term(self, node: str) -> int | None:
        """The term member ``node`` answers METADATA with (None: no answer)."""
        meta = await metadata(self._probe, self._peer(node), node)
        return None if meta is None else meta.term

    async def _same_term(self, cut: Cut, leader: str, term: int | None) -> None:
        """A steady cut's leader still leads in the term it had before the cut (``flap``
        otherwise: an election happened, however quickly the same member won it)."""
        now = await self._term(leader)
        if term is not None and now is not None and now != term:
            self.report.violations.append(
                Violation("flap", f"{cut}: leader {leader}'s term went {term} -> {now}")
            )

    async def _minority_leader(
        self, cut: Cut, leader: str, plan: _Plan, began: float
    ) -> float | None:
        """A cut that leaves the leader without a majority, while it holds: the leader steps
        down in time (when the client can ask it); in scenario (a) the other two elect a leader
        that acknowledges (elsewhere the client may not reach them); then hold a seeded while.
        Returns the failover time (scenario (a) only)."""
        step_down = (
            asyncio.create_task(self._wait_step_down(leader, began)) if plan.watched else None
        )
        failover: float | None = None
        try:
            if cut is Cut.LEADER_OFF:
                failover = await self._failover(began, self.g.addrs[leader])
        finally:
            stepped = await step_down if step_down is not None else 0.0
        if step_down is not None:
            took = "never" if stepped is None else f"after {stepped:.2f}s"
            print(f"  leader {leader} without a majority stepped down {took}", flush=True)
        if stepped is None or stepped > STEP_DOWN_LIMIT_S:
            self.report.violations.append(
                Violation(
                    "minority",
                    f"{cut}: leader {leader} without a majority still leads after "
                    f"{time.monotonic() - began if stepped is None else stepped:.1f}s",
                )
            )
        # (a) held a little past the failover; a random split for a seeded while
        await (self._hold(1.0, 4.0) if cut is Cut.LEADER_OFF else self._hold(3.0, 12.0))
        return failover

    async def _wait_step_down(self, leader: str, began: float) -> float | None:
        """Seconds from ``began`` until ``leader``'s METADATA names another leader or none
        (None: not within twice the limit)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STEP_DOWN_LIMIT_S * 2):
                while True:
                    named = await metadata_leader(self._probe, self._peer(leader), leader)
                    if named is not None and named != leader:
                        return time.monotonic() - began
                    await asyncio.sleep(_PROBE_EVERY_S)
        return None

    def _no_ok_from(self, addr: str, since: float, until: float) -> None:
        """No send begun in ``(since, until)`` was acknowledged by ``addr`` (a leader without a
        quorum all that time)."""
        for began, key, broker in self._ok_began:
            if broker == addr and since < began < until:
                self.report.violations.append(
                    Violation(
                        "minority",
                        f"{key} acked by the cut-off leader {addr}, begun "
                        f"{began - since:.2f}s into the cut",
                    )
                )

    async def _rejoined(self, leader: str) -> None:
        """After the heal: within FAILOVER_LIMIT_S the group lists a master with both slaves,
        it is not the old leader, and the old leader's METADATA names it (the old leader may be
        a candidate for a while: it bumped its term while cut off, section 3.1)."""
        master, named = "", None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FAILOVER_LIMIT_S):
                while True:
                    master = await self._leader()
                    named = await metadata_leader(self._probe, self._peer(leader), leader)
                    if named == master != leader:
                        return
                    await asyncio.sleep(_PROBE_EVERY_S)
        self.report.violations.append(
            Violation(
                "rejoin",
                f"{FAILOVER_LIMIT_S}s after the heal the master is {master}; old leader "
                f"{leader} follows {named!r}",
            )
        )

    async def _steady(self, cut: Cut, leader: str, watched: list[str], began: float) -> None:
        """A cut that leaves ``leader`` a majority, for a seeded 8-12 s (longer than a
        follower's 6 s leader-lost timeout plus a vote): every member in ``watched`` (those the
        client reaches on the leader's side) must name ``leader`` all along; for
        :data:`SERVING_CUTS`, SEND_OKs keep coming."""
        until = time.monotonic() + self.rng.uniform(8.0, 12.0)
        while time.monotonic() < until:
            for node in watched:
                named = await metadata_leader(self._probe, self._peer(node), node)
                if named is not None and named != leader:
                    self.report.violations.append(
                        Violation(
                            "flap",
                            f"{cut}: {node} names {named or 'no leader'} instead of {leader} "
                            f"{time.monotonic() - began:.1f}s into the cut",
                        )
                    )
                    return
            await asyncio.sleep(_PROBE_EVERY_S)
        if cut in SERVING_CUTS:
            self._no_stall(cut, began, time.monotonic())

    def _no_stall(self, cut: Cut, since: float, until: float) -> None:
        times = [t for t, _ in self._oks if since <= t <= until]
        gap = max(b - a for a, b in zip([since, *times], [*times, until], strict=True))
        if gap > STALL_LIMIT_S:
            self.report.violations.append(
                Violation("stall", f"{cut}: no SEND_OK for {gap:.1f}s while the cut held")
            )
