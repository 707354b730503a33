"""Network partitions in controller mode (issue 25, item 5; F-01, F-04, F-05) and slow
followers (F-08, H-09).

Every daemon runs in a network namespace of its own and links, not processes, fail
(tests/helpers/netlab.py, tests/helpers/partition_chaos.py). Producers send with
``allAckInSyncStateSet=true`` all along; afterwards the history checker judges every SEND_OK (read
back at its queue offset, none split between two masters), the replicas' CommitLogs are compared
byte for byte, a controller cut off from the others must never change its answer, and a cut that
leaves the master with its slaves and a controller majority must elect nobody.

Needs root and iproute2 (``ip netns``, ``tc``): skipped with the reason elsewhere.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.helpers.campaign import banner, chunk_seed, chunks, rounds_per_chunk
from tests.helpers.chaos_cluster import ChaosReport, Fault
from tests.helpers.netlab import NetLab, lab_fixture
from tests.helpers.partition_chaos import HOSTS, Cut, PartitionRun

lab = lab_fixture(HOSTS)


def _run(
    tmp: Path, net: NetLab, seed: int, rounds: int, kinds: list[Cut | Fault] | None
) -> ChaosReport:
    run = PartitionRun(tmp, seed, net)
    try:
        run.start()
        report = asyncio.run(run.run_mixed(rounds, kinds))
        print(report.render())
        assert report.summary is not None
        assert report.summary.ok > 0, report.render()
        assert not report.violations, report.render()
    except BaseException as e:
        print(f"partition chaos seed={seed}\n{run.dump()}")
        print(f"===== verdict\n{run.report.render()}\n{type(e).__name__}: {e}")
        raise
    finally:
        net.heal()
        run.stop()
    return report


@pytest.mark.process
@pytest.mark.timeout(420)
def test_partition_named_scenarios(tmp_path: Path, lab: NetLab) -> None:
    """1. Start mqnamesrv, three mqcontrollers and brokers 1-3 of broker-a, each in a network
    namespace of its own; two producers on the test's host send all along.
    2. In turn, heal after each and wait for the recovery: cut the master from the controllers
    only; cut a slave off; cut the controller leader from the other controllers and every broker;
    cut a controller follower off likewise (C-15); cut the client from the master only; cut
    {master, controller leader} from the rest (F-01);
    cut {master, one slave} from {controllers, the other slave} (F-04); cut only the link
    between the master and the controller leader (F-05); throttle what the master sends both
    slaves (F-08, H-09).
    Expected: F-01 and F-04 elect another master; the client, slave, controller-leader,
    controller-follower and slow-slaves rounds elect nobody; with a controller follower cut off
    no gap between SEND_OKs exceeds 2 s; with slow slaves none exceeds 20 s, nor 6 s once they
    left the SyncStateSet (if they lag that long); the cut-off controller never changes its
    answer; after each heal a master with SyncStateSet {1, 2, 3} and a SEND_OK; at the end
    every SEND_OK read at its queue offset, no offset acked twice, no phantom, queues in order,
    the three CommitLogs byte-identical."""
    kinds: list[Cut | Fault] = list(Cut)
    report = _run(tmp_path, lab, 25, len(kinds), kinds)
    assert {str(r.fault) for r in report.rounds} == {str(c) for c in Cut}


@pytest.mark.chaos
@pytest.mark.parametrize("chunk", chunks("PARTITION_CHUNKS", 3))
def test_partition_random_rounds(
    tmp_path: Path, lab: NetLab, capsys: pytest.CaptureFixture[str], chunk: int
) -> None:
    """1. Start the cluster of the named-scenarios test with its producers.
    2. CHAOS_ROUNDS (default 100) rounds, each a cut of the named-scenarios test or a kill,
    pause or restart of the controller chaos test, chosen by a seeded RNG
    (tests/helpers/campaign.py: the chunk's seed is printed).
    Expected: the checks of the named-scenarios test after every round and at the end."""
    with capsys.disabled():
        print(banner("partition", chunk))
        _run(tmp_path, lab, chunk_seed(chunk), rounds_per_chunk(), None)
