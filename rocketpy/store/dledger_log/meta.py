"""The two DLedger properties files beside the data: ``currterm`` and ``checkpoint``
(dledger-commitlog.md section 1.1).

Owns: their text (``currTerm=``, ``voteLeader=`` empty when none; ``endIndex=``,
``committedIndex=``), loading them and writing them as upstream's ``IOUtils.string2File`` does:
``<f>.tmp`` first, the previous content kept as ``<f>.bak``, then the rename (through
:func:`rocketpy.common.atomic_file.write_atomic`, which also fsyncs: a vote must survive a crash
of the machine). Mirrors ``MemberState.loadTerm`` / ``persistTerm`` and
``DLedgerMmapFileStore.persistCheckPoint`` / ``loadCheckPoint``. Blocking: callers run these off
the event loop. Must not: decide terms or commit points.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rocketpy.common.atomic_file import read_with_backup, write_atomic
from rocketpy.common.errors import CodecError
from rocketpy.common.properties import parse_properties, render_properties

TERM_PERSIST_FILE: Final = "currterm"
TERM_PERSIST_KEY_TERM: Final = "currTerm"
TERM_PERSIST_KEY_VOTE_FOR: Final = "voteLeader"
CHECK_POINT_FILE: Final = "checkpoint"
END_INDEX_KEY: Final = "endIndex"
COMMITTED_INDEX_KEY: Final = "committedIndex"


@dataclass(frozen=True, slots=True, kw_only=True)
class TermState:
    """``MemberState``'s persisted pair: the current term and whom it voted for (None: nobody)."""

    curr_term: int = 0
    vote_leader: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DLedgerCheckpoint:
    """The DLedger checkpoint: ledger end index and committed index (-1 when empty)."""

    end_index: int = -1
    committed_index: int = -1


def _long(props: dict[str, str], key: str) -> int | None:
    raw = props.get(key, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise CodecError(f"{key}={raw!r} is not a long", field=key) from exc


def encode_term_state(state: TermState) -> bytes:
    """``persistTerm``'s text."""
    return render_properties(
        {
            TERM_PERSIST_KEY_TERM: str(state.curr_term),
            TERM_PERSIST_KEY_VOTE_FOR: state.vote_leader or "",
        }
    ).encode()


def decode_term_state(data: bytes) -> TermState:
    """``loadTerm``: a missing term is 0, an empty vote is None.

    Raises:
        CodecError: ``currTerm`` is not a number.
    """
    props = parse_properties(data.decode("utf-8"))
    term = _long(props, TERM_PERSIST_KEY_TERM)
    vote = props.get(TERM_PERSIST_KEY_VOTE_FOR) or None
    return TermState(curr_term=term if term is not None else 0, vote_leader=vote)


def encode_checkpoint(cp: DLedgerCheckpoint) -> bytes:
    """``persistCheckPoint``'s text."""
    return render_properties(
        {END_INDEX_KEY: str(cp.end_index), COMMITTED_INDEX_KEY: str(cp.committed_index)}
    ).encode()


def decode_checkpoint(data: bytes) -> DLedgerCheckpoint:
    """``loadCheckPoint``; an absent or empty value is -1.

    Raises:
        CodecError: a value is not a number.
    """
    props = parse_properties(data.decode("utf-8"))
    end = _long(props, END_INDEX_KEY)
    committed = _long(props, COMMITTED_INDEX_KEY)
    return DLedgerCheckpoint(
        end_index=-1 if end is None else end, committed_index=-1 if committed is None else committed
    )


def load_term_state(base_dir: Path) -> TermState:
    """``dledger-<selfId>/currterm`` (or its ``.bak``); a fresh member has term 0, no vote.
    Blocks."""
    loaded = read_with_backup(base_dir / TERM_PERSIST_FILE, decode_term_state)
    return loaded.value if loaded is not None else TermState()


def persist_term_state(base_dir: Path, state: TermState) -> None:
    """Write ``currterm`` (tmp, ``.bak``, rename). Blocks."""
    write_atomic(base_dir / TERM_PERSIST_FILE, encode_term_state(state))


def load_checkpoint(base_dir: Path) -> DLedgerCheckpoint | None:
    """``dledger-<selfId>/checkpoint`` (or its ``.bak``), None when there is none. Blocks."""
    loaded = read_with_backup(base_dir / CHECK_POINT_FILE, decode_checkpoint)
    return loaded.value if loaded is not None else None


def persist_checkpoint(base_dir: Path, cp: DLedgerCheckpoint) -> None:
    """Write ``checkpoint`` (tmp, ``.bak``, rename). Blocks."""
    write_atomic(base_dir / CHECK_POINT_FILE, encode_checkpoint(cp))
