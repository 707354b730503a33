"""Message properties text (message-format.md section 3): ``name \\x01 value \\x02`` pairs, the
tags code, and the lookups the send and dispatch paths make without decoding the whole map.

Owns: the properties codec and :func:`tags_code`, for the client, the broker and the store alike.
Mirrors ``MessageDecoder.messageProperties2String`` / ``string2messageProperties``. Pure.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Final

from rocketpy.common.javahash import java_string_hash
from rocketpy.common.message.const import MessageConst

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"
MAX_PROPERTIES_BYTES: Final = 32767


@functools.lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """Consume-queue tags code of a normal topic (section 6): 0 for empty or absent tags.
    Cached: computed per message, and a topic's tags are few."""
    return java_string_hash(tags) if tags else 0


def encode_properties(props: Mapping[str, str | None]) -> str:
    """``messageProperties2String``: ``name \\x01 value \\x02`` for every non-None value."""
    return "".join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}"
        for k, v in props.items()
        if v is not None
    )


def decode_properties(text: str | None) -> dict[str, str]:
    """``string2messageProperties`` (section 3): segments without a name or a value are skipped;
    later duplicates win."""
    if not text:
        return {}
    # partition splits at the first separator as upstream's indexOf does; a non-empty name and
    # value imply the segment's length is at least 3 (upstream's check).
    return {
        name: value
        for name, _, value in (
            seg.partition(NAME_VALUE_SEPARATOR) for seg in text.split(PROPERTY_SEPARATOR)
        )
        if name and value
    }


def tags_code_of(text: str) -> int:
    """The consume-queue tags code of properties ``text`` (:func:`tags_code` of its TAGS)."""
    if _TAGS_NAME not in text:  # the reput calls this per record: nothing more when absent
        return 0
    return tags_code(_named_value(text, _TAGS_NAME))


def keys_of(text: str) -> tuple[str, str | None]:
    """(KEYS or "", UNIQ_KEY or None) of properties ``text``, as :func:`decode_properties`."""
    keys = _named_value(text, _KEYS_NAME) if _KEYS_NAME in text else None
    uniq = _named_value(text, _UNIQ_NAME) if _UNIQ_NAME in text else None
    return keys or "", uniq


def waits_for_store(wait: str | None) -> bool:
    """Whether a put waits for its flush (and replicas) given its WAIT property value
    (``isWaitStoreMsgOK``): absent, or anything but "false" in any case, waits."""
    return wait is None or wait.lower() != "false"


def property_value(text: str, name: str) -> str | None:
    """``decode_properties(text).get(name)`` without building the map (per message on the send
    path for ``WAIT``, per pulled record for ``UNIQ_KEY`` and ``TAGS``)."""
    named = _NAMED.get(name) or _named(name)
    if named not in text:  # the common case on the send path (WAIT)
        return None
    return _named_value(text, named)


def property_values(texts: list[str], name: str) -> list[str | None]:
    """:func:`property_value` of ``name`` in each of ``texts`` (a batch's UNIQ_KEYs: one call,
    its name looked up once)."""
    named = _NAMED.get(name) or _named(name)
    return [_named_value(text, named) if named in text else None for text in texts]


def _named(name: str) -> str:
    """``name`` + the name-value separator, remembered in :data:`_NAMED` while it has room."""
    named = f"{name}{NAME_VALUE_SEPARATOR}"
    if len(_NAMED) < _NAMED_MAX:
        _NAMED[name] = named
    return named


#: ``name`` + the name-value separator, by name (a handful of names are looked up per message).
_NAMED: dict[str, str] = {}
_NAMED_MAX: Final = 256


_TAGS_NAME: Final = f"{MessageConst.TAGS}{NAME_VALUE_SEPARATOR}"
_KEYS_NAME: Final = f"{MessageConst.KEYS}{NAME_VALUE_SEPARATOR}"
_UNIQ_NAME: Final = f"{MessageConst.UNIQ_KEY}{NAME_VALUE_SEPARATOR}"


def _named_value(text: str, named: str) -> str | None:
    """The value :func:`decode_properties` gives the property ``named`` (its name and the
    name-value separator), for a ``text`` known to contain ``named``. The usual case, its last
    occurrence starting a segment with a non-empty value, is read in place; anything else
    (``named`` ending a longer name or inside a value, an empty value) goes through
    :func:`_property`. Runs per record for the tags code and index keys."""
    i = text.rfind(named)
    if i == 0 or text[i - 1] == PROPERTY_SEPARATOR:
        start = i + len(named)
        stop = text.find(PROPERTY_SEPARATOR, start)
        value = text[start:] if stop < 0 else text[start:stop]
        if value:
            return value
    return _property(PROPERTY_SEPARATOR + text, PROPERTY_SEPARATOR + named)


def _property(framed: str, needle: str) -> str | None:
    """The value of the last segment of ``framed`` (properties with a leading separator) that
    starts with ``needle`` and has a non-empty value: :func:`decode_properties`' result."""
    end = len(framed)
    while (i := framed.rfind(needle, 0, end)) >= 0:
        start = i + len(needle)
        stop = framed.find(PROPERTY_SEPARATOR, start)
        value = framed[start:] if stop < 0 else framed[start:stop]
        if value:
            return value
        end = i
    return None
