"""Clocks: a monotonic clock for intervals and a wall clock for persisted timestamps.

Owns: the :class:`Clock` protocol time-driven logic takes (heartbeat expiry, Raft, catch-up
windows), so tests can drive time by hand with :class:`ManualClock`. Must not: sleep.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Time source for logic that expires or schedules things."""

    def monotonic_ms(self) -> int:
        """Milliseconds on a monotonic clock (intervals, deadlines)."""
        ...

    def wall_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (message and persisted timestamps)."""
        ...


class SystemClock:
    """The real clocks."""

    def monotonic_ms(self) -> int:
        """Milliseconds on ``time.monotonic``."""
        return time.monotonic_ns() // 1_000_000

    def wall_ms(self) -> int:
        """Milliseconds on ``time.time``."""
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock tests advance explicitly; both readings move together."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._wall = start_ms
        self._mono = 0

    def monotonic_ms(self) -> int:
        """The current manual monotonic reading."""
        return self._mono

    def wall_ms(self) -> int:
        """The current manual wall reading."""
        return self._wall

    def advance(self, ms: int) -> None:
        """Move both clocks forward by ``ms`` milliseconds."""
        self._mono += ms
        self._wall += ms


SYSTEM_CLOCK = SystemClock()
