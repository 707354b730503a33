"""Child process for the DLedger member SIGKILL test: one member of a 3-member group.

``dledger_member_child.py ROOT SELF_ID PEERS``: runs
:class:`rocketpy.dledger.commitlog_member.member.DLedgerMember` with the test timings of
:mod:`tests.helpers.dledger_member` under ROOT/SELF_ID, prints ``ready`` once its peer port is
bound, and on SIGTERM shuts down cleanly (flush, checkpoint) and prints ``stopped``. SIGKILL
leaves whatever the page cache and the last flush hold.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import structlog

from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig
from rocketpy.dledger.commitlog_member.member import DLedgerMember


def config(root: Path, self_id: str, peers: str) -> DLedgerMemberConfig:
    """The member's settings (also what the parent reopens its log with)."""
    return DLedgerMemberConfig(
        group="RaftNode00",
        self_id=self_id,
        peers=peers,
        store_base_dir=root / self_id,
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


async def main(root: Path, self_id: str, peers: str) -> None:
    """Serve until SIGTERM."""
    member = DLedgerMember(config(root, self_id, peers))
    await member.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    os.write(1, b"ready\n")
    await stop.wait()
    await member.shutdown()
    os.write(1, b"stopped\n")


if __name__ == "__main__":
    # Logs to stderr: stdout carries only ``ready`` and ``stopped``.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
