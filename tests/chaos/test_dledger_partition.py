"""Network partitions against a DLedger CommitLog group (issue 22: an acknowledged message is
never lost, not by a network partition; dledger-commitlog.md sections 3 and 6).

The NameServer and brokers n0-n2 of one DLedger group each run in a network namespace of their
own and links, not processes, fail (tests/helpers/netlab.py, tests/helpers/dledger_partition.py).
Two producers send to the NameServer's brokerId 0 and a consumer pulls from it all along.
After every round: a master with both slaves listed, a SEND_OK, and the members' committed
DLedger data and index files byte-identical; while a cut holds, a leader without a quorum
acknowledges nothing and steps down in time, and a leader that keeps a majority is never
replaced. At the end the history checker: every SEND_OK read back at its queue offset, queues in
order, no offset naming two messages, no phantom.

Needs root and iproute2 (``ip netns``, ``tc``): skipped with the reason elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.campaign import chunk_seed
from tests.helpers.dledger_chaos import DLedgerReport, Fault, judged
from tests.helpers.dledger_partition import HOSTS, NAMED_CUTS, Cut, DLedgerPartitionRun
from tests.helpers.netlab import NetLab, lab_fixture

pytestmark = pytest.mark.chaos


lab = lab_fixture(HOSTS)


def _run(
    tmp: Path, net: NetLab, seed: int, rounds: int, kinds: list[Cut | Fault] | None
) -> DLedgerReport:
    return judged(DLedgerPartitionRun(tmp, seed, net), lambda run: run.run_mixed(rounds, kinds))


@pytest.mark.timeout(600)
def test_dledger_partition_named_scenarios(tmp_path: Path, lab: NetLab) -> None:
    """1. Start mqnamesrv and brokers n0-n2 of one DLedger group, each in a network namespace
    of its own; two producers and a consumer on the test's host run all along.
    2. In turn, healing after each and waiting for the recovery: (a) cut the leader from both
    followers (it keeps the NameServer and the client); (b) cut one follower from everybody;
    (c) cut the client from the leader only; (d) split {leader, one follower, client} from
    {the other follower, NameServer}; (e) throttle what the leader sends one follower (F-08).
    Expected: (a) no send begun during the cut is acknowledged by the old leader, which steps
    down within 10 s, the other two elect a leader that acknowledges within 20 s, and after the
    heal the old leader follows it; (b)-(e) every member the client reaches names the old leader
    all through the cut, and in (b), (d) and (e) SEND_OKs keep coming (the other follower
    makes the quorum); after each round the committed
    data and index files are byte-identical on the three (the old leader's uncommitted tail
    truncated); at the end every SEND_OK is read back at its queue offset, queues in order, no
    offset names two messages."""
    kinds: list[Cut | Fault] = list(NAMED_CUTS)
    report = _run(tmp_path, lab, 22, len(kinds), kinds)
    assert [str(r.fault) for r in report.rounds] == [str(c) for c in NAMED_CUTS]


@pytest.mark.timeout(1800)
def test_dledger_partition_random_rounds(
    tmp_path: Path, lab: NetLab, capsys: pytest.CaptureFixture[str]
) -> None:
    """1. Start the group of the named-scenarios test with its producers and consumer.
    2. DLEDGER_PARTITION_ROUNDS (default 6) rounds chosen by a seeded RNG (CHAOS_SEED,
    tests/helpers/campaign.py: the seed is printed): two in three a cut, one of the
    named-scenarios test's or a random split of {client, NameServer, n0, n1, n2} into two sides;
    else a fault of the DLedger crash chaos (kill, pause, restart).
    Expected: the checks of the named-scenarios test after every round (a leader left without a
    majority by a random split acknowledges nothing begun after the cut and, if the client can
    ask it, steps down in time) and at the end."""
    rounds = int(os.environ.get("DLEDGER_PARTITION_ROUNDS", "6"))
    with capsys.disabled():
        print(f"\ndledger partition chaos: seed={chunk_seed(0)} rounds={rounds} (CHAOS_SEED)")
        _run(tmp_path, lab, chunk_seed(0), rounds, None)
