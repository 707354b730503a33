"""Java's ``String.hashCode``: tags codes, index keys and message-queue hashing all depend on it.

Owns: :func:`java_string_hash`, ``h = 31*h + c`` over UTF-16 code units with int32 overflow.
Computed as one dot product with precomputed powers of 31 modulo 2**32 (arithmetic mod 2**32 is
what int32 overflow does at every step, so the result is identical), which runs in C instead of a
Python loop per character: it is evaluated for every message's tags and keys.
"""

from __future__ import annotations

import operator
import struct

_MASK = 0xFFFFFFFF
_POWERS: list[int] = [1]  # _POWERS[k] = 31**k mod 2**32


def _powers(n: int) -> list[int]:
    while len(_POWERS) < n:
        _POWERS.append(_POWERS[-1] * 31 & _MASK)
    return _POWERS


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode`` of ``text``, as a signed 32-bit int (lone surrogates included)."""
    if text.isascii():
        units: bytes | tuple[int, ...] = text.encode("ascii")
    else:
        raw = text.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    h: int = sum(map(operator.mul, reversed(units), _powers(len(units)))) & _MASK
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h
