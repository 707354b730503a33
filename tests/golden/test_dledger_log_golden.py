"""Golden bytes of DLedger's CommitLog-mode files (dledger-commitlog.md sections 1.1-1.2):
data files with a blank tail, the index file, ``currterm`` and ``checkpoint``."""

from __future__ import annotations

from pathlib import Path

from rocketpy.store.dledger_log.meta import TermState, persist_term_state
from rocketpy.store.dledger_log.store import DLedgerLogStore, DLedgerStoreConfig
from tests.helpers.golden import load_hex

HERE = Path(__file__).parent / "dledger_log"


def _write_log(base: Path) -> DLedgerLogStore:
    store = DLedgerLogStore(DLedgerStoreConfig(base_dir=base, data_file_size=4096,
                                               index_file_size=128))  # fmt: skip
    store.load()
    for body in (b"a" * 2000, b"b" * 1990, b"hello"):
        store.append_as_leader(body, 5, patch=False)
    store.update_committed_index(1)
    store.close()
    return store


def test_dledger_files_golden_bytes(tmp_path: Path) -> None:
    """1. Append three raw bodies at term 5 to a log with 4 KiB data and 4-unit index files,
    commit 1, close. 2. Vote for n1 in term 6.
    Expected: both data files, the index file, ``checkpoint`` and ``currterm`` equal the golden
    bytes byte for byte."""
    base = tmp_path / "dledger-n0"
    _write_log(base)
    persist_term_state(base, TermState(curr_term=6, vote_leader="n1"))
    for name in ("00000000000000000000", "00000000000000004096"):
        assert (base / "data" / name).read_bytes() == load_hex(HERE / f"data_{name}.hex"), name
    assert sorted(p.name for p in (base / "data").iterdir()) == [
        "00000000000000000000",
        "00000000000000004096",
    ]
    index = (base / "index" / "00000000000000000000").read_bytes()
    assert index == load_hex(HERE / "index_00000000000000000000.hex")
    assert (base / "checkpoint").read_bytes() == load_hex(HERE / "checkpoint.hex")
    assert (base / "currterm").read_bytes() == load_hex(HERE / "currterm.hex")


def test_dledger_golden_files_recover(tmp_path: Path) -> None:
    """1. Lay the golden files out as a member's directory. 2. Load.
    Expected: ledger end 2 at term 5, committed index 1, entry 2 reads back "hello"."""
    base = tmp_path / "dledger-n1"
    (base / "data").mkdir(parents=True)
    (base / "index").mkdir()
    for name in ("00000000000000000000", "00000000000000004096"):
        (base / "data" / name).write_bytes(load_hex(HERE / f"data_{name}.hex"))
    (base / "index" / "00000000000000000000").write_bytes(
        load_hex(HERE / "index_00000000000000000000.hex")
    )
    (base / "checkpoint").write_bytes(load_hex(HERE / "checkpoint.hex"))
    store = DLedgerLogStore(DLedgerStoreConfig(base_dir=base, data_file_size=4096,
                                               index_file_size=128))  # fmt: skip
    result = store.load()
    assert (result.index_rewritten, result.cut_reason) == (0, "")
    assert (store.ledger_end_index, store.ledger_end_term, store.committed_index) == (2, 5, 1)
    assert store.get(2).body == b"hello"
    assert store.write_pos == 4096 + 53
    store.close()
