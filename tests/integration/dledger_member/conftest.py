"""Fixture: a factory of 3-member DLedger groups (tests/helpers/dledger_member.py), closed after
the test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.dledger_member import IDS, Group


@pytest.fixture
async def make_group(tmp_path: Path) -> AsyncIterator[Any]:
    groups: list[Group] = []

    async def make(**overrides: Any) -> Group:
        g = Group(tmp_path / f"g{len(groups)}", **overrides)
        groups.append(g)
        for i in IDS:
            await g.start(i)
        return g

    yield make
    for g in groups:
        await g.close()
