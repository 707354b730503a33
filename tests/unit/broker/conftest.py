"""Fixtures for broker unit tests (the fakes live in ``support.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.broker.support import FakeChannel, Harness


@pytest.fixture
def make_channel() -> Callable[[str], FakeChannel]:
    """Factory of :class:`FakeChannel` by peer address."""
    return FakeChannel


@pytest.fixture
def harness(tmp_path: Path) -> Callable[..., Harness]:
    """Factory: ``harness(**config)`` -> :class:`Harness` over a fresh tmp dir."""
    return lambda **config: Harness(tmp_path, **config)
