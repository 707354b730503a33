"""Golden vectors: hex files with one field per line, ``# comments``, and ``XX*N`` repeats."""

from __future__ import annotations

from pathlib import Path


def load_hex(path: Path) -> bytes:
    """Read a golden vector: hex digits per line (spaces allowed), ``#`` starts a comment, and
    ``XX*N`` stands for byte XX repeated N times (long zero runs in fixed-size files)."""
    out = bytearray()
    for raw in path.read_text(encoding="utf-8").splitlines():
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        if "*" in text:
            byte, count = text.split("*")
            out += bytes.fromhex(byte.strip()) * int(count)
        else:
            out += bytes.fromhex("".join(text.split()))
    return bytes(out)
