"""HEART_BEAT (34) body: ``HeartbeatData`` with its consumer, producer and subscription parts.

Owns: the frozen values, their fastjson encoding (what a Java client sends) and a lenient decoder
that accepts every client's dialect (client-flows.md section 3): Java (enum names), C++ (enum
ordinals as integers, ``subVersion`` as a string, no ``expressionType``/``classFilterMode``/
``unitMode``, empty sets and data sets absent, trailing newline) and ali-ons (names, data sets
always present). Mirrors ``remoting/protocol/heartbeat/{HeartbeatData,ConsumerData,ProducerData,
SubscriptionData,ConsumeType,MessageModel}`` and ``common/consumer/ConsumeFromWhere``. Pure.

JSON keys (sorted, as fastjson writes them):

| class | keys |
| --- | --- |
| HeartbeatData | ``clientID``, ``consumerDataSet``, ``heartbeatFingerprint``, |
| | ``producerDataSet``, ``withoutSub`` |
| ConsumerData | ``consumeFromWhere``, ``consumeType``, ``groupName``, ``messageModel``, |
| | ``subscriptionDataSet``, ``unitMode`` |
| SubscriptionData | ``classFilterMode``, ``codeSet``, ``expressionType``, ``subString``, |
| | ``subVersion``, ``tagsSet``, ``topic`` |
| ProducerData | ``groupName`` |
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from rocketpy.common import fastjson
from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import Bean, JavaSet

#: ``ConsumeType`` by ordinal.
CONSUME_TYPES: Final = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")
#: ``MessageModel`` by ordinal.
MESSAGE_MODELS: Final = ("BROADCASTING", "CLUSTERING")
#: ``ConsumeFromWhere`` by ordinal.
CONSUME_FROM_WHERE: Final = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)
CLUSTERING: Final = "CLUSTERING"
BROADCASTING: Final = "BROADCASTING"
SUB_ALL: Final = "*"  # SubscriptionData.SUB_ALL
EXPRESSION_TAG: Final = "TAG"  # ExpressionType.TAG
EXPRESSION_SQL92: Final = "SQL92"
_NUMERIC: Final = re.compile(r"\s*-?[0-9]+\s*")


def _obj(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise CodecError(f"expected an object, got {type(value).__name__}", field=name)
    return value


def _list(obj: Mapping[str, Any], key: str) -> Sequence[Any]:
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise CodecError(f"expected an array, got {type(value).__name__}", field=key)
    return value


def _long(obj: Mapping[str, Any], key: str, default: int) -> int:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        raise CodecError(f"expected a number, got {value!r}", field=key)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _NUMERIC.fullmatch(value):
        return int(value)
    raise CodecError(f"expected a number, got {value!r}", field=key)


def _str(obj: Mapping[str, Any], key: str, default: str) -> str:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise CodecError(f"expected a string, got {value!r}", field=key)
    return value


def _bool(obj: Mapping[str, Any], key: str) -> bool:
    value = obj.get(key)
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def _enum(obj: Mapping[str, Any], key: str, names: tuple[str, ...], default: str) -> str:
    """An enum by name or by ordinal (fastjson accepts both on input)."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < len(names):
            return names[value]
    elif isinstance(value, str):
        if value in names:
            return value
        if _NUMERIC.fullmatch(value) and 0 <= int(value) < len(names):
            return names[int(value)]
    raise CodecError(f"unknown enum value {value!r}", field=key)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionData:
    """One subscription: topic + tag expression, with the parsed tags and their hash codes."""

    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: str = EXPRESSION_TAG
    class_filter_mode: bool = False

    @property
    def matches_all(self) -> bool:
        """True when the expression is ``*`` or empty (every tag passes)."""
        return self.sub_string in ("", SUB_ALL) or not self.tags_set

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(
            classFilterMode=self.class_filter_mode,
            codeSet=JavaSet(self.code_set),
            expressionType=self.expression_type,
            subString=self.sub_string,
            subVersion=self.sub_version,
            tagsSet=JavaSet(self.tags_set),
            topic=self.topic,
        )

    @classmethod
    def from_json_value(cls, value: Any) -> SubscriptionData:
        """Read a decoded JSON object in any client's dialect."""
        obj = _obj(value, "subscriptionData")
        codes = tuple(_long({"codeSet": c}, "codeSet", 0) for c in _list(obj, "codeSet"))
        tags = tuple(str(t) for t in _list(obj, "tagsSet"))
        return cls(
            topic=_str(obj, "topic", ""),
            sub_string=_str(obj, "subString", SUB_ALL),
            tags_set=tags,
            code_set=codes,
            sub_version=_long(obj, "subVersion", 0),
            expression_type=_str(obj, "expressionType", EXPRESSION_TAG) or EXPRESSION_TAG,
            class_filter_mode=_bool(obj, "classFilterMode"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerData:
    """One consumer group's registration in a heartbeat."""

    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = CLUSTERING
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscription_data_set: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(
            consumeFromWhere=self.consume_from_where,
            consumeType=self.consume_type,
            groupName=self.group_name,
            messageModel=self.message_model,
            subscriptionDataSet=JavaSet(s.to_json_value() for s in self.subscription_data_set),
            unitMode=self.unit_mode,
        )

    @classmethod
    def from_json_value(cls, value: Any) -> ConsumerData:
        """Read a decoded JSON object in any client's dialect."""
        obj = _obj(value, "consumerData")
        return cls(
            group_name=_str(obj, "groupName", ""),
            consume_type=_enum(obj, "consumeType", CONSUME_TYPES, "CONSUME_PASSIVELY"),
            message_model=_enum(obj, "messageModel", MESSAGE_MODELS, CLUSTERING),
            consume_from_where=_enum(
                obj, "consumeFromWhere", CONSUME_FROM_WHERE, "CONSUME_FROM_LAST_OFFSET"
            ),
            subscription_data_set=tuple(
                SubscriptionData.from_json_value(s) for s in _list(obj, "subscriptionDataSet")
            ),
            unit_mode=_bool(obj, "unitMode"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatData:
    """``HeartbeatData``: one client's producer and consumer groups."""

    client_id: str
    producer_groups: tuple[str, ...] = ()
    consumer_data_set: tuple[ConsumerData, ...] = ()
    heartbeat_fingerprint: int = 0
    without_sub: bool = False

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(
            clientID=self.client_id,
            consumerDataSet=JavaSet(c.to_json_value() for c in self.consumer_data_set),
            heartbeatFingerprint=self.heartbeat_fingerprint,
            producerDataSet=JavaSet(Bean(groupName=g) for g in self.producer_groups),
            withoutSub=self.without_sub,
        )

    @classmethod
    def from_json_value(cls, value: Any) -> HeartbeatData:
        """Read a decoded JSON object in any client's dialect."""
        obj = _obj(value, "heartbeatData")
        producers = tuple(
            _str(_obj(p, "producerData"), "groupName", "") for p in _list(obj, "producerDataSet")
        )
        return cls(
            client_id=_str(obj, "clientID", ""),
            producer_groups=producers,
            consumer_data_set=tuple(
                ConsumerData.from_json_value(c) for c in _list(obj, "consumerDataSet")
            ),
            heartbeat_fingerprint=_long(obj, "heartbeatFingerprint", 0),
            without_sub=_bool(obj, "withoutSub") or _bool(obj, "isWithoutSub"),
        )


def encode_heartbeat(data: HeartbeatData) -> bytes:
    """Compact JSON as ``RemotingSerializable.encode`` writes it."""
    return fastjson.dumps(data.to_json_value()).encode()


def decode_heartbeat(body: bytes | None) -> HeartbeatData:
    """Parse a HEART_BEAT body.

    Raises:
        CodecError: missing body, not JSON, or a field of the wrong type (names the field).
    """
    if not body:
        raise CodecError("heartbeat body is empty", field="body")
    return HeartbeatData.from_json_value(fastjson.loads(body))
