"""Chaos campaigns in chunks (issue 25, item 6): ``make test-chaos`` runs >= 1,000 randomized
rounds as chunks of CHAOS_ROUNDS rounds (default 100), each chunk on a fresh cluster, so that a
failure names a small reproducible run and one stuck cluster does not take the campaign with it.

Chunks per mode: CONTROLLER_CHUNKS (default 4), CLASSIC_CHUNKS (3), PARTITION_CHUNKS (3). Every
chunk's seed is CHAOS_SEED (default: a fresh one, the same for the whole pytest run) plus its
index; re-run one with ``CHAOS_SEED=<base> pytest -m chaos -k '<test>[<chunk>]'``.
"""

from __future__ import annotations

import os
import random

_BASE = int(os.environ.get("CHAOS_SEED", str(random.SystemRandom().randrange(1 << 30))))


def rounds_per_chunk() -> int:
    """CHAOS_ROUNDS, default 100."""
    return int(os.environ.get("CHAOS_ROUNDS", "100"))


def chunks(env: str, default: int) -> list[int]:
    """The chunk indexes of one mode (``env`` chunks, else ``default``)."""
    return list(range(int(os.environ.get(env, str(default)))))


def chunk_seed(chunk: int) -> int:
    """The seed of chunk ``chunk``: the run's base seed plus the index."""
    return _BASE + chunk


def banner(mode: str, chunk: int) -> str:
    """The line a chunk prints first: how to re-run it."""
    return (
        f"\n{mode} chaos chunk {chunk}: seed={chunk_seed(chunk)} rounds={rounds_per_chunk()} "
        f"(CHAOS_SEED={_BASE})"
    )
