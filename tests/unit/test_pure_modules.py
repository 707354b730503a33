"""STYLE.md section 4: pure modules import no asyncio, socket, mmap, threading or structlog.

The list is matched by glob so new pure modules (headers, records, units) are covered as they land.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rocketpy

ROOT = Path(rocketpy.__file__).parent
PURE_GLOBS = (
    "common/codes.py",
    "common/errors.py",
    "common/properties.py",
    "common/attributes.py",
    "common/topic_message_type.py",
    "common/message/*.py",
    "remoting/protocol/**/*.py",
    "dledger/core.py",
    "dledger/messages.py",
    "dledger/election.py",
    "dledger/core_base.py",
    "dledger/core_types.py",
    "dledger/replication.py",
    "dledger/progress.py",
    "dledger/raft_log.py",
    "dledger/storage.py",
    "common/types.py",
    "controller/state/**/*.py",
    "controller/heartbeat.py",
    "namesrv/route_info.py",
    "store/dispatch.py",
    "store/**/record.py",
    "store/commit_log/record.py",
    "store/**/unit.py",
    "store/epoch_entries.py",
    "store/dledger_log/entry.py",
    "store/replication.py",
    "store/index/record.py",
    "common/fastjson.py",
    "ha/protocol.py",
    "ha/state.py",
    "ha/autoswitch/sync_state.py",
    "broker/transaction/util.py",
)
FORBIDDEN = {"asyncio", "socket", "mmap", "threading", "structlog", "selectors", "uvloop"}


def _pure_files() -> list[Path]:
    found: set[Path] = set()
    for pattern in PURE_GLOBS:
        found.update(ROOT.glob(pattern))
    return sorted(found)


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_pure_modules_exist() -> None:
    """The scan covers at least the modules present from the first commit."""
    names = {p.relative_to(ROOT).as_posix() for p in _pure_files()}
    assert {"common/codes.py", "remoting/protocol/command.py"} <= names


@pytest.mark.parametrize("path", _pure_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_pure_module_has_no_io_imports(path: Path) -> None:
    """1. Parse the module. 2. Collect its import roots. 3. None is an I/O or logging module."""
    bad = _imported_roots(path) & FORBIDDEN
    assert not bad, f"{path} imports {sorted(bad)}"
