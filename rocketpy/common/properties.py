"""Java ``.properties`` text: parse and render, as upstream config files and config bodies use it.

Owns: the subset of ``java.util.Properties`` syntax RocketMQ's files use (``key=value``, ``key:
value``, ``key value``, ``#``/``!`` comments, backslash line continuations and ``\\t \\n \\uXXXX``
escapes). Mirrors ``MixAll.string2Properties`` / ``MixAll.properties2String``. Must not: read files
on the event loop (callers read the text).
"""

from __future__ import annotations

import re

_LINE_BREAK = re.compile(r"\r\n|\r|\n")

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[str]:
    out: list[str] = []
    buf = ""
    for raw in _LINE_BREAK.split(text):  # Java breaks lines only on CR/LF
        line = raw.lstrip() if buf else raw
        if not buf and (not line.strip() or line.lstrip()[:1] in ("#", "!")):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            buf += line[:-1]
            continue
        out.append((buf + line).strip())
        buf = ""
    if buf:
        out.append(buf.strip())
    return out


def _unescape(s: str) -> str:
    res: list[str] = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch != "\\" or i + 1 >= len(s):
            res.append(ch)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u" and i + 6 <= len(s):
            try:
                res.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                pass
        res.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(res)


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t")
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``.properties`` text into an ordered dict (later keys win).

    Args:
        text: the file or body text.

    Returns:
        key -> value, both unescaped; values keep inner whitespace, trailing blanks are dropped.
    """
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        if key:
            result[key] = value.rstrip()
    return result


def _escape(s: str, *, is_key: bool) -> str:
    out: list[str] = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif is_key and ch in "=: ":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def render_properties(values: dict[str, str]) -> str:
    """Render key/value pairs as ``.properties`` text, one ``key=value`` per line.

    Mirrors ``MixAll.properties2String`` (no date comment, insertion order kept).
    """
    return "".join(
        f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}\n" for k, v in values.items()
    )
