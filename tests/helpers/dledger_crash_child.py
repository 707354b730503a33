"""Child process for the DLedger log SIGKILL test: append forever, print each flushed index.

``dledger_crash_child.py ROOT TERM``: opens (and so recovers) the log under ROOT with 64 KiB
data files and 256-unit index files, prints ``ready END COMMITTED``, then appends records
``record(i)`` at TERM; after every few appends it flushes, marks them committed and prints
``ack INDEX`` (the acknowledgement: everything up to INDEX is durable). Files for the next roll
are made ahead after each flush, so a kill can also leave an unused all-zero file behind.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rocketpy.common.message.record import MessageRecord, encode_record
from rocketpy.store.dledger_log.store import DLedgerLogStore, DLedgerStoreConfig

SIZES = {"data_file_size": 64 * 1024, "index_file_size": 32 * 256}
BATCH = 7


def config(root: Path) -> DLedgerStoreConfig:
    """What the parent reopens after the last kill."""
    return DLedgerStoreConfig(base_dir=root / "dledger-n0", **SIZES)


def body(i: int) -> bytes:
    """The message body of entry ``i`` (sizes vary so entries straddle file ends)."""
    return f"entry-{i}-".encode() * (1 + i % 13)


def record(i: int) -> bytes:
    """The record stored as entry ``i``."""
    return encode_record(MessageRecord(topic="DLedgerCrash", queue_id=0, body=body(i)))


def emit(*words: object) -> None:
    """One line in one write."""
    os.write(1, (" ".join(map(str, words)) + "\n").encode())


def main(root: Path, term: int) -> None:
    """Recover, then append and acknowledge until killed."""
    store = DLedgerLogStore(config(root))
    store.load()
    emit("ready", store.ledger_end_index, store.committed_index)
    i = store.ledger_end_index + 1
    acks = 0
    while True:
        for _ in range(BATCH):
            store.append_as_leader(record(i), term)
            i += 1
        store.flush()
        store.update_committed_index(store.ledger_end_index)
        emit("ack", store.ledger_end_index)
        acks += 1
        if acks % 5 == 0:
            store.persist_checkpoint()
        store.prepare_next_files()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
