"""The client unique id, ``UNIQ_KEY`` (message-format.md section 4.2), for the producer and for the
broker (which gives one to a message sent without it).

Owns: :class:`UniqIdGenerator`. Mirrors ``MessageClientIDSetter.createUniqID``. Pure: the caller
passes the wall-clock time.

16 bytes as 32 upper-case hex characters:

=====  ====  ========================================================================
off    size  field (upstream)
=====  ====  ========================================================================
0      4     IPv4 address (``UtilAll.getIP``; ``createFakeIP`` -- the low 4 bytes of the
             wall clock -- when there is none)
4      2     pid, low 16 bits (``putInt(pid)`` at offset 2, then overwritten by the address)
6      4     class-loader hash, any int (here a per-generator seed)
10     4     ms since 00:00 local time on the 1st of the month, as Java's ``(int)``
14     2     counter, as Java's ``(short) COUNTER.getAndIncrement()`` (first id 0)
=====  ====  ========================================================================
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import struct
from typing import Final

_FIX: Final = struct.Struct(">4sHI")


def _month_bounds(now_ms: int) -> tuple[int, int]:
    """Wall-clock ms of 00:00 local time on the 1st of ``now_ms``'s month and of the next
    (``setStartTime``: upstream's Calendar is in the JVM's default time zone)."""
    # Naive local datetimes: .timestamp() resolves each with its own UTC offset (DST).
    start = dt.datetime.fromtimestamp(now_ms / 1000).replace(
        day=1, hour=0, minute=0, second=0, microsecond=0
    )
    nxt = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


class UniqIdGenerator:
    """``MessageClientIDSetter``: one per producer (or broker); ids differ by time and counter."""

    def __init__(self, ip: str, pid: int, seed: int, *, now_ms: int = 0) -> None:
        """Args: ``ip`` this host's IPv4 address (anything else takes upstream's fake address,
        the low 4 bytes of ``now_ms``); ``pid``; ``seed`` stands in for the Java class-loader
        hash."""
        try:
            packed = ipaddress.IPv4Address(ip).packed
        except ValueError:
            packed = (now_ms & 0xFFFFFFFF).to_bytes(4, "big")
        self._prefix = _FIX.pack(packed, pid & 0xFFFF, seed & 0xFFFFFFFF).hex().upper()
        self._counter = 0
        self._month_start_ms = 0
        self._next_month_ms = 0

    def create(self, now_ms: int) -> str:
        """A new id for wall-clock time ``now_ms`` (``createUniqID``)."""
        if now_ms >= self._next_month_ms:
            self._month_start_ms, self._next_month_ms = _month_bounds(now_ms)
        counter = self._counter
        self._counter = (counter + 1) & 0xFFFF
        return f"{self._prefix}{(now_ms - self._month_start_ms) & 0xFFFFFFFF:08X}{counter:04X}"
