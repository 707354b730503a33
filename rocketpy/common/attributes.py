"""Topic attributes: the ``+key=value,-key`` modification syntax, the known keys and their
values, and how a modification is applied to a topic's current attributes.

Owns: :func:`parse_to_map` / :func:`parse_to_string` (``AttributeParser``), the attribute
kinds (``Attribute``, ``EnumAttribute``, ``LongRangeAttribute``), :data:`TOPIC_ATTRIBUTES`
(``TopicAttributes.ALL``) and :func:`alter_current_attributes`
(``AttributeUtil.alterCurrentAttributes``). Mirrors ``common/attribute/*`` and
``common/TopicAttributes`` (5.3.x). Must not: know about topics tables, files or the wire;
callers turn :class:`InvalidAttributeError` into their response code (the broker answers
SYSTEM_ERROR with the message as remark, as ``AdminBrokerProcessor.updateAndCreateTopic``).
Pure.

A modification map keeps the sign in its keys (``{"+message.type": "FIFO", "-reserve.time":
""}``): that is what ``UPDATE_AND_CREATE_TOPIC`` carries in its ``attributes`` header (as text)
and what upstream's ``TopicConfig`` holds until the broker applies it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from rocketpy.common.errors import RocketPyError
from rocketpy.common.topic_message_type import TopicMessageType

ADD_SIGN: Final = "+"  # AttributeParser.ATTR_ADD_PLUS_SIGN
DELETE_SIGN: Final = "-"
_SEPARATOR: Final = ","
_EQUALS: Final = "="
JAVA_LONG_MAX: Final = 2**63 - 1
JAVA_LONG_MIN: Final = -(2**63)
_JAVA_LONG: Final = re.compile(r"[+-]?[0-9]+")


class InvalidAttributeError(RocketPyError):
    """A modification upstream refuses (bad format, unknown key, bad value, unchangeable key);
    the message is upstream's ``RuntimeException`` text."""


@dataclass(frozen=True, slots=True)
class EnumAttribute:
    """``EnumAttribute``: one of a fixed set of strings."""

    name: str
    changeable: bool
    universe: frozenset[str]
    default_value: str

    def verify(self, value: str) -> None:
        """Raises: InvalidAttributeError: ``value`` is not in the set."""
        if value not in self.universe:
            # upstream prints a Java HashSet; sorted here so the text is stable
            raise InvalidAttributeError(
                f"value is not in set: [{', '.join(sorted(self.universe))}]"
            )


@dataclass(frozen=True, slots=True)
class LongRangeAttribute:
    """``LongRangeAttribute``: a Java long within ``[min, max]``."""

    name: str
    changeable: bool
    min: int
    max: int
    default_value: int

    def verify(self, value: str) -> None:
        """Raises: InvalidAttributeError: not a number or out of range."""
        # Long.parseLong: optional sign, ASCII digits, within a Java long
        if _JAVA_LONG.fullmatch(value) is None or not JAVA_LONG_MIN <= int(value) <= JAVA_LONG_MAX:
            raise InvalidAttributeError(f'For input string: "{value}"')
        number = int(value)
        if number < self.min or number > self.max:
            raise InvalidAttributeError(f"value is not in range({self.min}, {self.max})")


Attribute = EnumAttribute | LongRangeAttribute

QUEUE_TYPE_ATTRIBUTE: Final = EnumAttribute(
    "queue.type", False, frozenset({"BatchCQ", "SimpleCQ"}), "SimpleCQ"
)
CLEANUP_POLICY_ATTRIBUTE: Final = EnumAttribute(
    "cleanup.policy", False, frozenset({"DELETE", "COMPACTION"}), "DELETE"
)
TOPIC_MESSAGE_TYPE_ATTRIBUTE: Final = EnumAttribute(
    "message.type",
    True,
    frozenset(t.value for t in TopicMessageType),
    TopicMessageType.NORMAL.value,
)
TOPIC_RESERVE_TIME_ATTRIBUTE: Final = LongRangeAttribute(
    "reserve.time", True, -1, JAVA_LONG_MAX, -1
)
TOPIC_ATTRIBUTES: Final[Mapping[str, Attribute]] = {
    a.name: a
    for a in (
        QUEUE_TYPE_ATTRIBUTE,
        CLEANUP_POLICY_ATTRIBUTE,
        TOPIC_MESSAGE_TYPE_ATTRIBUTE,
        TOPIC_RESERVE_TIME_ATTRIBUTE,
    )
}


def parse_to_map(text: str | None) -> dict[str, str]:
    """``AttributeParser.parseToMap``: ``+k=v,+k2=v2,-k3`` -> ``{"+k": "v", "+k2": "v2",
    "-k3": ""}`` (signs kept).

    Raises:
        InvalidAttributeError: an item with ``=`` but no ``+``, without ``=`` but no ``-``, a
            value missing after ``=``, or a key given twice.
    """
    out: dict[str, str] = {}
    if not text:
        return out
    items = text.split(_SEPARATOR)
    while items and items[-1] == "":  # Java's String.split drops trailing empty strings
        items.pop()
    for kv in items:
        if _EQUALS in kv:
            parts = kv.split(_EQUALS)
            while parts and parts[-1] == "":
                parts.pop()
            if len(parts) < 2:
                # upstream fails here with an ArrayIndexOutOfBoundsException
                raise InvalidAttributeError(f"add/alter attribute value is missing: {kv}")
            key, value = parts[0], parts[1]
            if ADD_SIGN not in key:
                raise InvalidAttributeError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if DELETE_SIGN not in key:
                raise InvalidAttributeError(f"delete attribute format is wrong: {key}")
        if key in out:
            raise InvalidAttributeError(f"key duplication: {key}")
        out[key] = value
    return out


def parse_to_string(attributes: Mapping[str, str]) -> str:
    """``AttributeParser.parseToString``: a modification map back to its text (a key with an
    empty value is written alone); keys sorted here, upstream uses HashMap order."""
    return _SEPARATOR.join(f"{k}{_EQUALS}{v}" if v else k for k, v in sorted(attributes.items()))


def _validate_key(real_key: str) -> None:
    if not real_key or ADD_SIGN in real_key or DELETE_SIGN in real_key:
        raise InvalidAttributeError("kv string format wrong.")


def _validate_alter(
    known: Mapping[str, Attribute], alter: Mapping[str, str], *, init: bool, delete: bool
) -> None:
    for key, value in alter.items():
        attribute = known.get(key)
        if attribute is None:
            raise InvalidAttributeError(f"unsupported key: {key}")
        if not init and not attribute.changeable:
            raise InvalidAttributeError(f"attempt to update an unchangeable attribute. key: {key}")
        if not delete:
            attribute.verify(value)


def alter_current_attributes(
    create: bool,
    known: Mapping[str, Attribute],
    current: Mapping[str, str],
    modification: Mapping[str, str],
) -> dict[str, str]:
    """``AttributeUtil.alterCurrentAttributes``: apply a signed modification map.

    Args:
        create: the topic does not exist yet (only ``+`` items are allowed, and unchangeable
            keys may be set).
        known: the allowed keys (:data:`TOPIC_ATTRIBUTES` for topics).
        current: the topic's attributes now (unsigned keys).
        modification: signed keys as :func:`parse_to_map` returns them.

    Returns:
        The new attributes (unsigned keys).

    Raises:
        InvalidAttributeError: with upstream's message for each refusal.
    """
    init: dict[str, str] = {}
    add: dict[str, str] = {}
    update: dict[str, str] = {}
    delete: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in modification.items():
        real_key = key[1:]
        _validate_key(real_key)
        if real_key in seen:
            raise InvalidAttributeError(f"alter duplication key. key: {real_key}")
        seen.add(real_key)
        if create:
            if not key.startswith(ADD_SIGN):
                raise InvalidAttributeError(
                    f"only add attribute is supported while creating topic. key: {real_key}"
                )
            init[real_key] = value
        elif key.startswith(ADD_SIGN):
            (update if real_key in current else add)[real_key] = value
        elif key.startswith(DELETE_SIGN):
            if real_key not in current:
                raise InvalidAttributeError(f"attempt to delete a nonexistent key: {real_key}")
            delete[real_key] = value
        else:
            raise InvalidAttributeError(f"wrong format key: {real_key}")
    _validate_alter(known, init, init=True, delete=False)
    _validate_alter(known, add, init=False, delete=False)
    _validate_alter(known, update, init=False, delete=False)
    _validate_alter(known, delete, init=False, delete=True)
    final = {**current, **init, **add, **update}
    for key in delete:
        final.pop(key, None)
    return final
