"""POP consumption's text and JSON formats: ExtraInfo (the receipt handle), the offset-info
response headers, and the checkpoint/ack bodies written to the revive topic. Pure.

Owns (proxy.md sections 3.1-3.4), each mirroring an upstream class of apache/rocketmq 5.3:

* ExtraInfo (``ExtraInfoUtil.buildExtraInfo``/``split``): 8 space-separated fields
  ``<ckStartOffset> <popTime> <invisibleTime> <reviveQid> <topicType> <brokerName> <queueId>
  <queueOffset>``, an optional 9th (commit-log offset) appended by the proxy. Topic type ``0``
  normal, ``1`` retry (``%RETRY%<group>_<topic>``), ``2`` retry v2 (``%RETRY%<group>+<topic>``).
* ``startOffsetInfo`` ``"<t> <queueId> <ckStart>"``, ``msgOffsetInfo`` ``"<t> <queueId>
  <o1,o2,...>"``, ``orderCountInfo`` ``"<t> qo<queueId>%<offset> <count>"`` (or ``"<t> <queueId>
  <count>"`` per queue), each ``;``-joined (``ExtraInfoUtil.build*Info``/``parse*Info``).
* :class:`PopCheckPoint` (``ck``), :class:`AckMsg` (``ack``) and :class:`BatchAckMsg` (``bAck``)
  JSON as fastjson writes them (fields sorted, ``None`` left out), and the BATCH_ACK_MESSAGE body
  ``BatchAckMessageRequestBody`` with ``BatchAck`` (bit set as base64 of
  ``BitSet.toByteArray``, ``BitSetSerializerDeserializer``).
* ``KeyBuilder.buildPopRetryTopic``, ``PopAckConstants.buildClusterReviveTopic`` and the
  checkpoint/ack unique keys (``genCkUniqueId``/``genAckUniqueId``).

Must not: do I/O; raise anything but :class:`~rocketpy.common.errors.CodecError` on bad input.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import Bean, dumps, loads, quote

NORMAL_TOPIC: Final = "0"
RETRY_TOPIC: Final = "1"
RETRY_TOPIC_V2: Final = "2"
RETRY_PREFIX: Final = "%RETRY%"
#: ``KeyBuilder.POP_ORDER_REVIVE_QUEUE``: the revive queue id an orderly pop answers with.
POP_ORDER_REVIVE_QUEUE: Final = 999
CK_TAG: Final = "ck"
ACK_TAG: Final = "ack"
BATCH_ACK_TAG: Final = "bAck"
#: ``PopAckConstants.REVIVE_GROUP``: revive progress lives under this group.
REVIVE_GROUP: Final = "CID_RMQ_SYS_REVIVE_GROUP"
REVIVE_TOPIC_PREFIX: Final = "rmq_sys_REVIVE_LOG_"
_SPLIT: Final = "@"


def revive_topic(cluster_name: str) -> str:
    """``PopAckConstants.buildClusterReviveTopic``."""
    return REVIVE_TOPIC_PREFIX + cluster_name


def pop_retry_topic(topic: str, group: str, *, v2: bool = False) -> str:
    """``KeyBuilder.buildPopRetryTopic``: ``%RETRY%<group>_<topic>`` (``+`` for v2)."""
    return f"{RETRY_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def topic_type(topic: str) -> str:
    """``ExtraInfoUtil.getRetry``: the ExtraInfo topic type of a stored topic."""
    if not topic.startswith(RETRY_PREFIX):
        return NORMAL_TOPIC
    return RETRY_TOPIC_V2 if "+" in topic else RETRY_TOPIC


def real_topic(type_: str, topic: str, group: str) -> str:
    """``ExtraInfoUtil.getRealTopic``: the topic an ack names for a handle of ``type_``."""
    if type_ == RETRY_TOPIC:
        return pop_retry_topic(topic, group)
    if type_ == RETRY_TOPIC_V2:
        return pop_retry_topic(topic, group, v2=True)
    return topic


# -- ExtraInfo -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtraInfo:
    """One message's POP handle (``ExtraInfoUtil``); ``commit_log_offset`` -1 when absent."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    topic_type: str
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int = -1

    def encode(self) -> str:
        """``buildExtraInfo`` (plus the 9th field when set)."""
        text = (
            f"{self.ck_queue_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} "
            f"{self.topic_type} {self.broker_name} {self.queue_id} {self.queue_offset}"
        )
        return text if self.commit_log_offset < 0 else f"{text} {self.commit_log_offset}"

    def expired(self, now_ms: int) -> bool:
        """The handle is no longer valid: ``popTime + invisibleTime <= now``."""
        return self.pop_time + self.invisible_time <= now_ms


def decode_extra_info(text: str) -> ExtraInfo:
    """``ExtraInfoUtil.split`` and the getters; CodecError when fewer than 8 fields or a number
    does not parse."""
    parts = text.split(" ")
    if len(parts) < 8:
        raise CodecError(f"extraInfo has {len(parts)} fields, need 8", field="extraInfo")
    try:
        return ExtraInfo(
            ck_queue_offset=int(parts[0]),
            pop_time=int(parts[1]),
            invisible_time=int(parts[2]),
            revive_qid=int(parts[3]),
            topic_type=parts[4],
            broker_name=parts[5],
            queue_id=int(parts[6]),
            queue_offset=int(parts[7]),
            commit_log_offset=int(parts[8]) if len(parts) > 8 else -1,
        )
    except ValueError as e:
        raise CodecError(f"extraInfo {text!r}: {e}", field="extraInfo") from e


# -- offset info headers ---------------------------------------------------------------------


def build_start_offset_info(parts: list[str], topic: str, queue_id: int, start: int) -> None:
    """``buildStartOffsetInfo``: append one ``"<t> <queueId> <start>"`` entry."""
    parts.append(f"{topic_type(topic)} {queue_id} {start}")


def build_msg_offset_info(
    parts: list[str], topic: str, queue_id: int, offsets: Sequence[int]
) -> None:
    """``buildMsgOffsetInfo``: append one ``"<t> <queueId> <o1,o2,...>"`` entry."""
    parts.append(f"{topic_type(topic)} {queue_id} {','.join(str(o) for o in offsets)}")


def build_order_count_info(
    parts: list[str], topic: str, queue_id: int, queue_offset: int, count: int
) -> None:
    """``buildQueueOffsetOrderCountInfo``: ``"<t> qo<queueId>%<offset> <count>"``."""
    parts.append(f"{topic_type(topic)} qo{queue_id}%{queue_offset} {count}")


def build_queue_order_count_info(parts: list[str], topic: str, queue_id: int, count: int) -> None:
    """``buildQueueIdOrderCountInfo``: ``"<t> <queueId> <count>"``."""
    parts.append(f"{topic_type(topic)} {queue_id} {count}")


def info_key(type_: str, queue_id: int) -> str:
    """``getStartOffsetInfoMapKey``: ``<t>@<queueId>``."""
    return f"{type_}@{queue_id}"


def parse_start_offset_info(text: str | None) -> dict[str, int]:
    """``parseStartOffsetInfo``: ``<t>@<queueId>`` -> ck start offset."""
    out: dict[str, int] = {}
    for entry in _entries(text, "startOffsetInfo"):
        out[info_key(entry[0], _int(entry[1], "startOffsetInfo"))] = _int(
            entry[2], "startOffsetInfo"
        )
    return out


def parse_msg_offset_info(text: str | None) -> dict[str, list[int]]:
    """``parseMsgOffsetInfo``: ``<t>@<queueId>`` -> message queue offsets, in order."""
    out: dict[str, list[int]] = {}
    for entry in _entries(text, "msgOffsetInfo"):
        offsets = [_int(o, "msgOffsetInfo") for o in entry[2].split(",") if o]
        out[info_key(entry[0], _int(entry[1], "msgOffsetInfo"))] = offsets
    return out


def parse_order_count_info(text: str | None) -> dict[str, int]:
    """``parseOrderCountInfo``: key ``<t>@<queueId>@<offset>`` (``qo`` entries) or
    ``<t>@<queueId>`` -> consume count."""
    out: dict[str, int] = {}
    for entry in _entries(text, "orderCountInfo"):
        where = entry[1]
        if where.startswith("qo"):
            qid, _, offset = where[2:].partition("%")
            key = f"{entry[0]}@{_int(qid, 'orderCountInfo')}@{_int(offset, 'orderCountInfo')}"
        else:
            key = info_key(entry[0], _int(where, "orderCountInfo"))
        out[key] = _int(entry[2], "orderCountInfo")
    return out


def _entries(text: str | None, name: str) -> list[list[str]]:
    if not text:
        return []
    entries = []
    for raw in text.split(";"):
        parts = raw.split(" ")
        if len(parts) != 3:
            raise CodecError(f"{name} entry {raw!r} is not 3 fields", field=name)
        entries.append(parts)
    return entries


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError as e:
        raise CodecError(f"{name}: {text!r} is not a number", field=name) from e


# -- revive-topic bodies ---------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class PopCheckPoint:
    """``PopCheckPoint``: one pop of one queue; ``queue_offset_diff[i]`` is the i-th message's
    offset minus ``start_offset``; ``bit_map`` bit i set = message i acked."""

    start_offset: int
    pop_time: int
    invisible_time: int
    bit_map: int = 0
    num: int
    queue_id: int
    topic: str
    cid: str
    revive_offset: int = 0
    queue_offset_diff: list[int] = field(default_factory=list)
    broker_name: str | None = None
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        """``popTime + invisibleTime``."""
        return self.pop_time + self.invisible_time

    def offset_at(self, index: int) -> int:
        """``ackOffsetByIndex``: the queue offset of message ``index``."""
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def index_of(self, offset: int) -> int:
        """``indexOfAck``: the position of ``offset`` in this checkpoint, -1 if absent."""
        if offset < self.start_offset:
            return -1
        if not self.queue_offset_diff:
            idx = offset - self.start_offset
            return idx if idx < self.num else -1
        try:
            return self.queue_offset_diff.index(offset - self.start_offset)
        except ValueError:
            return -1

    def encode(self) -> bytes:
        """fastjson of the ``@JSONField`` names."""
        return dumps(
            Bean(
                so=self.start_offset,
                pt=self.pop_time,
                it=self.invisible_time,
                bm=self.bit_map,
                n=self.num,
                q=self.queue_id,
                t=self.topic,
                c=self.cid,
                ro=self.revive_offset,
                d=list(self.queue_offset_diff),
                bn=self.broker_name,
                rp=self.re_put_times,
            )
        ).encode()

    def unique_id(self) -> str:
        """``genCkUniqueId``: ``topic@queueId@so@group@popTime@broker@ck``."""
        return _SPLIT.join(
            (
                self.topic,
                str(self.queue_id),
                str(self.start_offset),
                self.cid,
                str(self.pop_time),
                self.broker_name or "",
                CK_TAG,
            )
        )


@dataclass(slots=True, kw_only=True)
class AckMsg:
    """``AckMsg``: one acked offset of the checkpoint ``(t, q, so, c, pt)``."""

    ack_offset: int
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str | None = None

    def encode(self) -> bytes:
        """fastjson of the ``@JSONField`` names: what ``dumps`` writes for the bean (fields
        sorted, ``bn`` left out when None), built directly since every ack is encoded once."""
        return self._encode("").encode()

    def _encode(self, aol: str) -> str:
        """The bean's JSON with ``aol`` (``,"aol":[..]`` or nothing) after ``ao``."""
        bn = "" if self.broker_name is None else f',"bn":{quote(self.broker_name)}'
        return (
            f'{{"ao":{int(self.ack_offset)}{aol}{bn},"c":{quote(self.consumer_group)},'
            f'"pt":{int(self.pop_time)},"q":{int(self.queue_id)},"so":{int(self.start_offset)},'
            f'"t":{quote(self.topic)}}}'
        )

    def unique_id(self, tag: str = ACK_TAG) -> str:
        """``genAckUniqueId``: ``topic@queueId@ao@group@popTime@broker@ack``."""
        return _SPLIT.join(
            (
                self.topic,
                str(self.queue_id),
                str(self.ack_offset),
                self.consumer_group,
                str(self.pop_time),
                self.broker_name or "",
                tag,
            )
        )


@dataclass(slots=True, kw_only=True)
class BatchAckMsg(AckMsg):
    """``BatchAckMsg``: several acked offsets of one checkpoint (``aol``)."""

    ack_offset_list: list[int] = field(default_factory=list)

    def encode(self) -> bytes:
        """fastjson of the ``@JSONField`` names (``aol`` added)."""
        return self._encode(
            f',"aol":[{",".join(str(int(o)) for o in self.ack_offset_list)}]'
        ).encode()


def decode_checkpoint(body: bytes) -> PopCheckPoint:
    """Parse a ``ck`` body."""
    obj = _object(body, "PopCheckPoint")
    try:
        return PopCheckPoint(
            start_offset=int(obj["so"]),
            pop_time=int(obj["pt"]),
            invisible_time=int(obj["it"]),
            bit_map=int(obj.get("bm", 0)),
            num=int(obj["n"]),
            queue_id=int(obj["q"]),
            topic=str(obj["t"]),
            cid=str(obj["c"]),
            revive_offset=int(obj.get("ro", 0)),
            queue_offset_diff=[int(d) for d in obj.get("d") or []],
            broker_name=obj.get("bn"),
            re_put_times=obj.get("rp"),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise CodecError(f"PopCheckPoint: {e!r}", field="ck") from e


def decode_ack(body: bytes) -> AckMsg:
    """Parse an ``ack`` or ``bAck`` body (a :class:`BatchAckMsg` when it has ``aol``)."""
    obj = _object(body, "AckMsg")
    try:
        fields: dict[str, Any] = {
            "ack_offset": int(obj.get("ao", 0)),
            "start_offset": int(obj["so"]),
            "consumer_group": str(obj["c"]),
            "topic": str(obj["t"]),
            "queue_id": int(obj["q"]),
            "pop_time": int(obj["pt"]),
            "broker_name": obj.get("bn"),
        }
        if "aol" in obj:
            return BatchAckMsg(**fields, ack_offset_list=[int(o) for o in obj["aol"]])
        return AckMsg(**fields)
    except (KeyError, TypeError, ValueError) as e:
        raise CodecError(f"AckMsg: {e!r}", field="ack") from e


def _object(body: bytes, name: str) -> Mapping[str, Any]:
    obj = loads(body)
    if not isinstance(obj, dict):
        raise CodecError(f"{name} body is not a JSON object", field=name)
    return obj


# -- BATCH_ACK_MESSAGE body ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchAck:
    """``BatchAck``: acked offsets ``start_offset + i`` for every set bit ``i``."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bit_set: frozenset[int]

    @property
    def offsets(self) -> list[int]:
        """The acked queue offsets, ascending."""
        return [self.start_offset + i for i in sorted(self.bit_set)]


def encode_bit_set(bits: frozenset[int] | set[int]) -> str:
    """``BitSet.toByteArray`` (little-endian, no trailing zero bytes) as base64."""
    value = sum(1 << b for b in bits)
    raw = value.to_bytes((value.bit_length() + 7) // 8, "little") if value else b""
    return base64.b64encode(raw).decode("ascii")


def decode_bit_set(text: str) -> frozenset[int]:
    """Inverse of :func:`encode_bit_set`."""
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError as e:
        raise CodecError(f"bit set {text!r} is not base64", field="b") from e
    value = int.from_bytes(raw, "little")
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def encode_batch_ack_body(broker_name: str, acks: Sequence[BatchAck]) -> bytes:
    """``BatchAckMessageRequestBody`` JSON."""
    return dumps(
        Bean(
            brokerName=broker_name,
            acks=[
                Bean(
                    c=a.consumer_group,
                    t=a.topic,
                    r=a.retry,
                    so=a.start_offset,
                    q=a.queue_id,
                    rq=a.revive_queue_id,
                    pt=a.pop_time,
                    it=a.invisible_time,
                    b=encode_bit_set(a.bit_set),
                )
                for a in acks
            ],
        )
    ).encode()


def decode_batch_ack_body(body: bytes) -> tuple[str | None, list[BatchAck]]:
    """Parse ``BatchAckMessageRequestBody``: (brokerName, acks). Accepts the long field names
    too (``alternateNames``)."""
    obj = _object(body, "BatchAckMessageRequestBody")
    acks: list[BatchAck] = []
    try:
        for raw in obj.get("acks") or []:

            def get(short: str, long: str, raw: Mapping[str, Any] = raw) -> Any:
                return raw[short] if short in raw else raw[long]

            bits = get("b", "bitSet")
            acks.append(
                BatchAck(
                    consumer_group=str(get("c", "consumerGroup")),
                    topic=str(get("t", "topic")),
                    retry=str(get("r", "retry")),
                    start_offset=int(get("so", "startOffset")),
                    queue_id=int(get("q", "queueId")),
                    revive_queue_id=int(get("rq", "reviveQueueId")),
                    pop_time=int(get("pt", "popTime")),
                    invisible_time=int(get("it", "invisibleTime")),
                    bit_set=decode_bit_set(bits) if bits else frozenset(),
                )
            )
    except (KeyError, TypeError, ValueError) as e:
        raise CodecError(f"BatchAck: {e!r}", field="acks") from e
    broker = obj.get("brokerName")
    return (str(broker) if broker is not None else None), acks
