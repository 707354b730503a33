"""Faults against a DLedger CommitLog group under load (issue 22; dledger-commitlog.md section 6).

Two producers send to the NameServer's brokerId 0 and a consumer pulls from it all along while
seeded faults hit the three brokers of one DLedger group (tests/helpers/dledger_chaos.py).
After every round and at the end: no SEND_OK lost, queues in order, no phantom, no copy beyond
the attempts, the live consumer's reads unchanged, the members' committed DLedger data and
index files byte-identical, a new master within FAILOVER_LIMIT_S when a majority lives, no
SEND_OK for a send begun while a majority is down. The fast test runs each fault once;
``-m chaos`` runs DLEDGER_CHUNKS chunks of CHAOS_ROUNDS random rounds
(tests/helpers/campaign.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.campaign import banner, chunk_seed, chunks, rounds_per_chunk
from tests.helpers.dledger_chaos import DLedgerChaosRun, DLedgerReport, Fault, judged


def _run(tmp: Path, seed: int, rounds: int, faults: list[Fault] | None) -> DLedgerReport:
    return judged(DLedgerChaosRun(tmp, seed), lambda run: run.run(rounds, faults))


@pytest.mark.process
@pytest.mark.timeout(600)
def test_dledger_chaos_every_fault_once(tmp_path: Path) -> None:
    """1. Start mqnamesrv and brokers n0-n2 of one DLedger group (default DLedger timings);
    two producers and a consumer run all along.
    2. One round of each fault: SIGKILL the leader, SIGKILL a follower, SIGSTOP/SIGCONT the
    leader (until another master acknowledges) and a follower, kill-restart a member, restart
    the leader, SIGKILL all three, SIGKILL both followers.
    Expected after each round: a master and both slaves listed, the committed data and index
    byte-identical on the three; a new master acknowledges within 20 s of a leader fault; no
    send begun while both followers are down gets SEND_OK. At the end: no violation of the
    history (lost, phantom, duplicate, order, split-brain) and the consumer's reads hold."""
    report = _run(tmp_path, 22, len(Fault), list(Fault))
    assert {r.fault for r in report.rounds} == set(Fault)


@pytest.mark.chaos
@pytest.mark.parametrize("chunk", chunks("DLEDGER_CHUNKS", 1))
def test_dledger_chaos_random_rounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], chunk: int
) -> None:
    """1. Start the group of the every-fault test with its producers and consumer.
    2. Run CHAOS_ROUNDS (default 100) rounds, each a fault chosen by a seeded RNG
    (tests/helpers/campaign.py: the chunk's seed is printed).
    Expected: the checks of the every-fault test after every round and at the end; the summary
    lists rounds, faults by kind, sends ok/failed/unknown, failover and recovery times."""
    with capsys.disabled():  # `make test-chaos` shows the rounds and the summary as they come
        print(banner("dledger", chunk))
        _run(tmp_path, chunk_seed(chunk), rounds_per_chunk(), None)
