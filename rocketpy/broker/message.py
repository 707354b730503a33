"""Message pieces the broker adds on top of the store's record codec: property keys and the
client unique id. Pure.

Owns: :class:`MessageConst` keys the broker reads or writes and :class:`UniqIdGenerator`
(``MessageClientIDSetter``, message-format.md section 4.2). The properties string, offset message
ids and the batch body are the store's (:mod:`rocketpy.store.commit_log.properties`,
:mod:`~rocketpy.store.commit_log.record`, :mod:`~rocketpy.store.commit_log.batch_body`).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import struct
from typing import Final


class MessageConst:
    """Property keys (``MessageConst``) the broker reads or writes."""

    KEYS: Final = "KEYS"
    TAGS: Final = "TAGS"
    WAIT: Final = "WAIT"
    DELAY: Final = "DELAY"
    UNIQ_KEY: Final = "UNIQ_KEY"
    TRAN_MSG: Final = "TRAN_MSG"
    PGROUP: Final = "PGROUP"
    REAL_TOPIC: Final = "REAL_TOPIC"
    REAL_QID: Final = "REAL_QID"
    RETRY_TOPIC: Final = "RETRY_TOPIC"
    ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    RECONSUME_TIME: Final = "RECONSUME_TIME"
    CLUSTER: Final = "CLUSTER"
    MSG_REGION: Final = "MSG_REGION"
    TRACE_ON: Final = "TRACE_ON"
    POP_CK: Final = "POP_CK"


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
