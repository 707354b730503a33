"""The client unique id the broker gives a message sent without one. Pure.

Owns: :class:`UniqIdGenerator` (``MessageClientIDSetter``, message-format.md section 4.2). Property
keys, the properties string and the batch body are :mod:`rocketpy.common.message`'s.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import struct
from typing import Final


def month_start_ms(now_ms: int) -> int:
    """Wall-clock ms at 00:00 local time on the first day of ``now_ms``'s month (upstream uses
    the JVM's default time zone)."""
    now = dt.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


class UniqIdGenerator:
    """``MessageClientIDSetter.createUniqID``: 16 bytes as 32 upper-case hex characters.

    Layout: IPv4 (4) + pid (int16) + a per-process hash (int32) + ms since the start of the
    current month (int32) + counter (int16).
    """

    _FIX: Final = struct.Struct(">4shi")
    _VAR: Final = struct.Struct(">ih")

    def __init__(self, ip: str, pid: int, seed: int) -> None:
        """Args: ``ip`` an IPv4 address of this host (others fall back to loopback); ``pid``;
        ``seed`` stands in for the Java class-loader hash."""
        try:
            packed = ipaddress.IPv4Address(ip).packed
        except ValueError:
            packed = ipaddress.IPv4Address("127.0.0.1").packed
        self._prefix = self._FIX.pack(packed, pid & 0x7FFF, seed & 0x7FFFFFFF).hex().upper()
        self._counter = 0

    def create(self, now_ms: int) -> str:
        """A new id for wall-clock time ``now_ms``."""
        self._counter = (self._counter + 1) & 0x7FFF
        diff = (now_ms - month_start_ms(now_ms)) & 0x7FFFFFFF
        return self._prefix + self._VAR.pack(diff, self._counter).hex().upper()
