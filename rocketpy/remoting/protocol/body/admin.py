"""Decoding the admin reply bodies whose maps are keyed by a :class:`MessageQueue`.

Owns: a reader for fastjson's object-keyed maps (``{{"brokerName":"b","queueId":0,"topic":"T"}:7}``,
which is not JSON) and the decoders of GET_CONSUME_STATS (``ConsumeStats``), GET_TOPIC_STATS_INFO
(``TopicStatsTable``), INVOKE_BROKER_TO_RESET_OFFSET (``ResetOffsetBody``) and
GET_BROKER_RUNTIME_INFO (``KVTable``) as ``MQAdminExt`` reads them. The encoders live in
``body/broker.py``. Mirrors fastjson's ``DefaultJSONParser`` for non-String map keys. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from rocketpy.common.errors import CodecError
from rocketpy.remoting.protocol.body.broker import MessageQueue, OffsetWrapper, TopicOffset

_DECODER: Final = json.JSONDecoder()
_WS: Final = " \t\r\n"


class KeyedPairs(list[tuple[Any, Any]]):
    """A JSON object some of whose keys are objects: its ``(key, value)`` pairs in order."""

    __slots__ = ()


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _expect(text: str, pos: int, char: str) -> int:
    pos = _skip(text, pos)
    if pos >= len(text) or text[pos] != char:
        raise CodecError(f"expected {char!r}", field="json", offset=pos)
    return pos + 1


def _value(text: str, pos: int) -> tuple[Any, int]:
    pos = _skip(text, pos)
    if pos >= len(text):
        raise CodecError("unexpected end of JSON", field="json", offset=pos)
    if text[pos] == "{":
        return _object(text, pos + 1)
    if text[pos] == "[":
        return _array(text, pos + 1)
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as e:
        raise CodecError(f"invalid JSON: {e.msg}", field="json", offset=e.pos) from e


def _array(text: str, pos: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    pos = _skip(text, pos)
    if pos < len(text) and text[pos] == "]":
        return items, pos + 1
    while True:
        item, pos = _value(text, pos)
        items.append(item)
        pos = _skip(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos += 1
            continue
        return items, _expect(text, pos, "]")


def _object(text: str, pos: int) -> tuple[Any, int]:
    pairs = KeyedPairs()
    pos = _skip(text, pos)
    if pos < len(text) and text[pos] == "}":
        return {}, pos + 1
    while True:
        key, pos = _value(text, pos)
        if isinstance(key, int | float):
            key = str(key)  # fastjson's bare integer keys
        pos = _expect(text, pos, ":")
        value, pos = _value(text, pos)
        pairs.append((key, value))
        pos = _skip(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos += 1
            continue
        pos = _expect(text, pos, "}")
        if all(isinstance(k, str) for k, _ in pairs):
            return dict(pairs), pos
        return pairs, pos


def loads_keyed(body: bytes | str) -> Any:
    """Parse JSON in which object keys may themselves be objects (fastjson's
    ``Map<MessageQueue, ...>``); such an object comes back as :class:`KeyedPairs`.

    Raises:
        CodecError: not UTF-8, or not JSON of that extended shape; names the offset.
    """
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CodecError("JSON is not UTF-8", field="json", offset=e.start) from e
    value, pos = _value(body, 0)
    if _skip(body, pos) != len(body):
        raise CodecError("trailing data after JSON", field="json", offset=pos)
    return value


def _root(body: bytes | None, name: str) -> Mapping[str, Any]:
    if not body:
        raise CodecError("body is empty", field=name)
    root = loads_keyed(body)
    if not isinstance(root, Mapping):
        raise CodecError("expected an object", field=name)
    return root


def _queue_table(root: Mapping[str, Any]) -> list[tuple[MessageQueue, Any]]:
    table = root.get("offsetTable") or {}
    if isinstance(table, Mapping):  # empty, or written with string keys
        return []
    if not isinstance(table, KeyedPairs):
        raise CodecError("expected an object", field="offsetTable")
    return [(MessageQueue.from_json_value(k), v) for k, v in table]


def _int(obj: Any, key: str) -> int:
    if not isinstance(obj, Mapping):
        raise CodecError("expected an object", field=key)
    value = obj.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise CodecError(f"expected an integer, got {value!r}", field=key)
    try:
        return int(value)
    except ValueError as e:
        raise CodecError(f"expected an integer, got {value!r}", field=key) from e


def _float(root: Mapping[str, Any], key: str) -> float:
    value = root.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CodecError(f"expected a number, got {value!r}", field=key)
    return float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeStatsReply:
    """A decoded ``ConsumeStats`` (``consumeTps`` is a Java double)."""

    offset_table: dict[MessageQueue, OffsetWrapper]
    consume_tps: float


def decode_consume_stats(body: bytes | None) -> ConsumeStatsReply:
    """GET_CONSUME_STATS reply body.

    Raises:
        CodecError: a malformed body.
    """
    root = _root(body, "consumeStats")
    table = {
        mq: OffsetWrapper(
            broker_offset=_int(w, "brokerOffset"),
            consumer_offset=_int(w, "consumerOffset"),
            pull_offset=_int(w, "pullOffset"),
            last_timestamp=_int(w, "lastTimestamp"),
        )
        for mq, w in _queue_table(root)
    }
    return ConsumeStatsReply(offset_table=table, consume_tps=_float(root, "consumeTps"))


def decode_topic_stats(body: bytes | None) -> tuple[dict[MessageQueue, TopicOffset], float]:
    """GET_TOPIC_STATS_INFO reply body: per queue offsets and ``topicPutTps`` (0 if absent).

    Raises:
        CodecError: a malformed body.
    """
    root = _root(body, "topicStatsTable")
    table = {
        mq: TopicOffset(
            min_offset=_int(t, "minOffset"),
            max_offset=_int(t, "maxOffset"),
            last_update_timestamp=_int(t, "lastUpdateTimestamp"),
        )
        for mq, t in _queue_table(root)
    }
    return table, _float(root, "topicPutTps")


def decode_reset_offset_body(body: bytes | None) -> dict[MessageQueue, int]:
    """``ResetOffsetBody``: queue -> the offset it was reset to.

    Raises:
        CodecError: a malformed body.
    """
    root = _root(body, "resetOffsetBody")
    out: dict[MessageQueue, int] = {}
    for mq, offset in _queue_table(root):
        out[mq] = _int({"offset": offset}, "offset")
    return out


def decode_kv_table(body: bytes | None) -> dict[str, str]:
    """``KVTable``: ``{"table":{...}}``, values as strings.

    Raises:
        CodecError: a malformed body.
    """
    table = _root(body, "kvTable").get("table") or {}
    if not isinstance(table, Mapping):
        raise CodecError("expected an object", field="table")
    return {str(k): str(v) for k, v in table.items()}
