"""Java's ``String.hashCode``: tags codes, index keys and message-queue hashing all depend on it.

Owns: :func:`java_string_hash`, ``h = 31*h + c`` over UTF-16 code units with int32 overflow.

The stepwise definition equals ``sum(c[i] * 31**(n-1-i)) mod 2**32`` (arithmetic mod 2**32 is
what int32 overflow does at every step). That sum is evaluated exactly by CPython's C parser of
base-31 numerals, ``int(digits, 31)``: a byte ``b`` is ``31*(b // 31) + b % 31`` with both parts
below 31, so two ``bytes.translate`` calls turn the bytes into two base-31 numerals whose values
``lo + 31*hi`` are the sum. A UTF-16 unit is ``256*high byte + low byte``, so non-ASCII text is two
such byte strings. It runs about four times faster than a per-unit dot product and is evaluated
for every message's tags and index keys. Long texts go in chunks (the C parser is quadratic and
refuses numerals above ``sys.get_int_max_str_digits()``), joined as
``hash(a + b) = hash(a) * 31**len(b) + hash(b)``. Texts of bytes '0'..'N' only (upper-case hex
UNIQ_KEYs, the index's most common keys) need one numeral: each byte is 48 plus a digit.
"""

from __future__ import annotations

from typing import Final

_MASK: Final = 0xFFFFFFFF
_DIGITS: Final = b"0123456789abcdefghijklmnopqrstu"  # the 31 digits of base 31
_LO: Final = bytes(_DIGITS[b % 31] for b in range(256))
_HI: Final = bytes(_DIGITS[b // 31] for b in range(256))  # 255 // 31 == 8
#: Below this many bytes the plain loop beats the two parses (tags such as ``TagA``).
_SHORT: Final = 8
#: Bytes per numeral: short enough for the quadratic parser and far below the digit limit.
_CHUNK: Final = 128
#: 31**_CHUNK mod 2**32, the factor that shifts a hash past one full chunk.
_CHUNK_POWER: Final = pow(31, _CHUNK, 1 << 32)
#: 31**n mod 2**32 for n up to _CHUNK: shifts a prefix's hash past a text of n units.
_POWERS: Final = tuple(pow(31, n, 1 << 32) for n in range(_CHUNK + 1))
#: The bytes '0'..'N' (48..78: digits, upper-case hex) are 48 plus one base-31 digit, so a text
#: of only those (a UNIQ_KEY, a numeric key) is one numeral: ``hash = 48 * sum(31**k for k < n)
#: + int(digits, 31)``, one parse instead of two.
_NARROW: Final = bytes(range(48, 79))
_NARROW_DIGITS: Final = bytes(_DIGITS[b - 48] if 48 <= b <= 78 else 48 for b in range(256))
#: 48 * (31**n - 1) / 30 mod 2**32, the part of a narrow text's hash its length fixes.
_NARROW_BASE: Final = tuple(48 * ((31**n - 1) // 30) & _MASK for n in range(_CHUNK + 1))


def _poly(raw: bytes) -> int:
    """``sum(raw[i] * 31**(n-1-i))`` exactly, for a non-empty ``raw`` of at most ``_CHUNK``."""
    return int(raw.translate(_LO), 31) + 31 * int(raw.translate(_HI), 31)


def _poly_mod(raw: bytes) -> int:
    """``sum(raw[i] * 31**(n-1-i)) mod 2**32`` for any length."""
    n = len(raw)
    if n < _SHORT:
        h = 0
        for b in raw:
            h = h * 31 + b
        return h & _MASK
    if n <= _CHUNK:
        return _poly(raw) & _MASK
    head = n % _CHUNK or _CHUNK
    h = _poly(raw[:head])
    for start in range(head, n, _CHUNK):
        h = (h * _CHUNK_POWER + _poly(raw[start : start + _CHUNK])) & _MASK
    return h & _MASK


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode`` of ``text``, as a signed 32-bit int (lone surrogates included)."""
    if text.isascii():
        raw = text.encode("ascii")
        if _SHORT <= len(raw) <= _CHUNK:  # typical index keys: _poly inlined
            h = (int(raw.translate(_LO), 31) + 31 * int(raw.translate(_HI), 31)) & _MASK
        else:
            h = _poly_mod(raw)
    else:
        # Code units, big-endian: even bytes are the high halves, odd bytes the low halves.
        raw = text.encode("utf-16-be", "surrogatepass")
        h = (_poly_mod(raw[0::2]) * 256 + _poly_mod(raw[1::2])) & _MASK
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def java_string_hashes(prefix: str, texts: list[str]) -> list[int]:
    """:func:`java_string_hash` of ``prefix`` followed by each of ``texts`` (a run's index keys,
    ``topic#key``: one call). ASCII texts share their work: the prefix is hashed once and shifted
    past each text (``hash(a + b) = hash(a) * 31**len(b) + hash(b)``), and the texts' bytes
    become numerals with two ``translate`` calls for all of them, each text then a slice."""
    joined = "".join(texts)
    if not (joined.isascii() and prefix.isascii()):
        return [java_string_hash(prefix + text) for text in texts]
    raw = joined.encode("ascii")
    head = _poly_mod(prefix.encode("ascii"))
    powers, short, chunk = _POWERS, _SHORT, _CHUNK
    out: list[int] = []
    start = 0
    if raw and not raw.translate(None, _NARROW):  # UNIQ_KEYs: one numeral each
        digits, base = raw.translate(_NARROW_DIGITS), _NARROW_BASE
        for text in texts:
            n = len(text)
            end = start + n
            if 0 < n <= chunk:
                h = (head * powers[n] + base[n] + int(digits[start:end], 31)) & _MASK
            else:
                h = (head * pow(31, n, 1 << 32) + _poly_mod(raw[start:end])) & _MASK
            out.append(h - 0x1_0000_0000 if h & 0x8000_0000 else h)
            start = end
        return out
    lo, hi = raw.translate(_LO), raw.translate(_HI)
    for text in texts:
        n = len(text)
        end = start + n
        if short <= n <= chunk:  # typical keys: _poly inlined, on slices of the joined numerals
            h = (head * powers[n] + int(lo[start:end], 31) + 31 * int(hi[start:end], 31)) & _MASK
        else:
            h = (head * pow(31, n, 1 << 32) + _poly_mod(raw[start:end])) & _MASK
        out.append(h - 0x1_0000_0000 if h & 0x8000_0000 else h)
        start = end
    return out
