"""JSON as Java's fastjson 1.2.x writes it, and a reader that accepts what it writes.

Owns: :func:`dumps` (compact and ``prettyFormat`` output, byte-for-byte the shape fastjson 1.2.83
emits for RocketMQ's ``RemotingSerializable`` classes) and :func:`loads` (standard JSON plus the
unquoted integer map keys fastjson writes for ``Map<Integer, ...>`` and ``Map<Long, ...>``).
Must not: know any RocketMQ class; the shapes live with their owners
(``remoting/protocol/body/config_shapes.py``).
Pure: no I/O.

Value model (what :func:`dumps` accepts), mirroring fastjson's serializers:

| Python value | fastjson serializer | compact output |
| --- | --- | --- |
| :class:`Bean` | ``JavaBeanSerializer`` (fields sorted) | ``{"a":1}``, ``None`` fields left out |
| ``dict`` | ``MapSerializer`` (insertion order) | ``{"k":v}``; int keys unquoted: ``{0:v}``; |
| | | :class:`BeanKey` keys as objects: ``{{"a":1}:v}`` |
| ``list`` / ``tuple`` | ``ListSerializer`` | ``[a,b]`` |
| :class:`JavaSet`, ``set`` | ``CollectionCodec`` (``set``: sorted) | ``[a,b]`` |
| ``str`` / ``int`` / ``bool`` / ``None`` | | ``"s"`` / ``12`` / ``true`` / ``null`` |

Pretty output (``PrettyFormat``, TAB indentation): a bean puts newline + indent before each field
and before ``}``; a list before each item and before ``]``; a map only before each *string*-keyed
entry, and before ``}`` when non-empty; a set adds no line breaks of its own (its items may).

The "odd line break" of integer-keyed maps (``{0:250,1:251\\n\\t\\t}``) is fastjson's own:
``MapSerializer`` prints a newline before an entry only when its key is a ``String`` but always
before the closing brace (``store.md`` section 7).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from rocketpy.common.errors import CodecError

_INDENT: Final = "\t"
_DIGITS: Final = "0123456789"

# fastjson IOUtils.specicalFlags_doubleQuotes: short escapes for these, \uXXXX (upper hex) for
# the other C0 controls and for U+007F..U+009F.
_SHORT_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


class Bean(dict[str, Any]):
    """A Java bean: fields are written sorted by name and ``None`` fields are left out."""

    __slots__ = ()


class BeanKey(tuple[tuple[str, Any], ...]):
    """A Java bean used as a map key (``Map<MessageQueue, ...>``): hashable, written as an object
    by ``MapSerializer``. Field values must be hashable scalars."""

    __slots__ = ()

    def __new__(cls, **fields: Any) -> BeanKey:
        """Build from keyword fields (stored sorted, as a bean writes them)."""
        return super().__new__(cls, tuple(sorted(fields.items())))


class JavaSet(list[Any]):
    """A Java ``Set`` (``CollectionCodec``), items in the given order; use it for sets of beans,
    which Python cannot put in a ``set``."""

    __slots__ = ()


#: Every character :func:`quote` rewrites (the short escapes, C0 controls, DEL and C1 controls).
_NEEDS_ESCAPE: Final = re.compile(r'["\\\x00-\x1f\x7f-\x9f]')


def quote(text: str) -> str:
    """Quote a string as fastjson's ``SerializeWriter.writeStringWithDoubleQuote`` does."""
    if _NEEDS_ESCAPE.search(text) is None:
        # Names, numbers as text, base64 bodies: nothing to escape (one C-level scan instead of
        # a Python step per character; DLedger pushes quote every entry's base64 body).
        return f'"{text}"'
    out: list[str] = ['"']
    for ch in text:
        short = _SHORT_ESCAPES.get(ch)
        if short is not None:
            out.append(short)
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dumps(value: Any, *, pretty: bool = False) -> str:
    """Serialize ``value`` as ``JSON.toJSONString(value, pretty)`` would.

    Args:
        value: built from the value model in the module docstring.
        pretty: fastjson's ``PrettyFormat`` (what ``ConfigManager.persist`` writes to disk).

    Returns:
        The JSON text, with no trailing newline (fastjson writes none).

    Raises:
        TypeError: a value outside the model (float, bytes, arbitrary objects).
    """
    writer = _Writer(pretty)
    writer.write(value)
    return "".join(writer.out)


class _Writer:
    __slots__ = ("indent", "out", "pretty")

    def __init__(self, pretty: bool) -> None:
        self.pretty = pretty
        self.indent = 0
        self.out: list[str] = []

    def println(self) -> None:
        self.out.append("\n" + _INDENT * self.indent)

    def write(self, value: Any) -> None:
        if value is None:
            self.out.append("null")
        elif value is True:
            self.out.append("true")
        elif value is False:
            self.out.append("false")
        elif isinstance(value, int):
            self.out.append(str(value))
        elif isinstance(value, str):
            self.out.append(quote(value))
        elif isinstance(value, Bean):
            self.write_bean(value)
        elif isinstance(value, Mapping):
            self.write_map(value)
        elif isinstance(value, JavaSet):
            self.write_set(value)
        elif isinstance(value, list | tuple):
            self.write_list(value)
        elif isinstance(value, set | frozenset):
            # Java's HashSet order is not reproducible; sorted keeps our output deterministic.
            self.write_set(sorted(value))
        else:
            raise TypeError(f"fastjson.dumps: unsupported value of type {type(value).__name__}")

    def write_bean(self, bean: Bean) -> None:
        # JavaBeanSerializer.write: println after '{' and before '}' whenever the bean has getters.
        self.out.append("{")
        if self.pretty:
            self.indent += 1
            self.println()
        first = True
        for name in sorted(bean):
            field = bean[name]
            if field is None:
                continue
            if not first:
                self.out.append(",")
                if self.pretty:
                    self.println()
            first = False
            self.out.append(quote(name) + ":")
            self.write(field)
        if self.pretty:
            self.indent -= 1
            self.println()
        self.out.append("}")

    def write_map(self, mapping: Mapping[Any, Any]) -> None:
        # MapSerializer.write: only String keys get a println before them; the closing brace gets
        # one whenever the map is non-empty. Null values are skipped (no WriteMapNullValue).
        self.out.append("{")
        self.indent += 1
        first = True
        for key, item in mapping.items():
            if item is None:
                continue
            if not first:
                self.out.append(",")
            if isinstance(key, str):
                if self.pretty:
                    self.println()
                self.out.append(quote(key) + ":")
            elif isinstance(key, int) and not isinstance(key, bool):
                self.out.append(f"{key}:")
            elif isinstance(key, BeanKey):
                # Map<MessageQueue, ...> (ConsumeStats, TopicStatsTable, ResetOffsetBody): fastjson
                # writes a non-String key with its own serializer, so the key is an object.
                self.write(Bean(key))
                self.out.append(":")
            else:
                raise TypeError(f"fastjson.dumps: unsupported map key {key!r}")
            first = False
            self.write(item)
        self.indent -= 1
        if self.pretty and mapping:
            self.println()
        self.out.append("}")

    def write_list(self, items: list[Any] | tuple[Any, ...]) -> None:
        if not items:
            self.out.append("[]")
            return
        self.out.append("[")
        if self.pretty:
            self.indent += 1
        for i, item in enumerate(items):
            if i:
                self.out.append(",")
            if self.pretty:
                self.println()
            self.write(item)
        if self.pretty:
            self.indent -= 1
            self.println()
        self.out.append("]")

    def write_set(self, items: list[Any]) -> None:
        # CollectionCodec: no newline or indent of its own even with PrettyFormat, but the items
        # are written by their own serializers, which do honour it.
        self.out.append("[")
        for i, item in enumerate(items):
            if i:
                self.out.append(",")
            self.write(item)
        self.out.append("]")


def loads(text: str | bytes) -> Any:
    """Parse JSON that may carry fastjson's unquoted integer map keys (``{0:250}``).

    Integer keys come back as strings (``{"0": 250}``), exactly as if they had been quoted; the
    shape decoders convert them. Standard JSON parses unchanged.

    Raises:
        CodecError: not JSON even after quoting bare integer keys; names the offset.
    """
    if isinstance(text, bytes | bytearray | memoryview):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CodecError("JSON is not UTF-8", field="json", offset=e.start) from e
    try:
        return json.loads(quote_integer_keys(text))
    except json.JSONDecodeError as e:
        raise CodecError(f"invalid JSON: {e.msg}", field="json", offset=e.pos) from e


def quote_integer_keys(text: str) -> str:
    """Put quotes around bare integer object keys outside string literals.

    A bare number right after ``{`` or ``,`` (whitespace allowed) and followed by ``:`` can only
    be an object key: in arrays numbers are followed by ``,`` or ``]``.
    """
    out: list[str] = []
    i, n = 0, len(text)
    expect_key = False
    while i < n:
        ch = text[i]
        if ch == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
            expect_key = False
            continue
        if expect_key and (ch == "-" or ch in _DIGITS):
            j = i + 1
            while j < n and text[j] in _DIGITS:
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if k < n and text[k] == ":" and text[i:j] not in ("-", ""):
                out.append(f'"{text[i:j]}"')
                i = j
                expect_key = False
                continue
        if ch in "{,":
            expect_key = True
        elif ch not in " \t\r\n":
            expect_key = False
        out.append(ch)
        i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """Index just past the string literal that opens at ``start`` (or the end of the text)."""
    i = start + 1
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == '"':
            return i + 1
        i += 1
    return n
