"""JSON shapes of the broker's config files and of the topic/version bodies shared with the
NameServer: DataVersion, TopicConfig, SubscriptionGroupConfig and their serialize wrappers.

Owns: the frozen values and their conversion to and from the JSON text Java writes (fastjson:
keys sorted, integer map keys unquoted; ``pretty=True`` is what ``ConfigManager.persist`` puts on
disk, compact is what ``RemotingSerializable.encode`` sends). Must not: do I/O (the file driver is
``broker/config_files.py``). Pure.

Mirrors ``remoting/protocol/DataVersion``, ``common/TopicConfig``,
``remoting/protocol/subscription/SubscriptionGroupConfig``,
``remoting/protocol/body/TopicConfigSerializeWrapper``, ``ConsumerOffsetManager``,
``DelayOffsetSerializeWrapper`` and ``SubscriptionGroupManager`` (store.md section 7, codes.md
section 5). JSON keys, as fastjson writes them (sorted):

| class | keys |
| --- | --- |
| DataVersion | ``counter``, ``stateVersion`` (5.x), ``timestamp`` |
| TopicConfig | ``attributes`` (5.x), ``order``, ``perm``, ``readQueueNums``, |
| | ``topicFilterType``, ``topicName``, ``topicSysFlag``, ``writeQueueNums`` |
| SubscriptionGroupConfig | ``attributes``, ``brokerId``, ``consumeBroadcastEnable``, |
| | ``consumeEnable``, ``consumeFromMinEnable``, ``consumeMessageOrderly``, |
| | ``consumeTimeoutMinute``, ``groupName``, ``groupRetryPolicy``, ``groupSysFlag``, |
| | ``notifyConsumerIdsChangedEnable``, ``retryMaxTimes``, ``retryQueueNums``, |
| | ``subscriptionDataSet`` (omitted when null), ``whichBrokerWhenConsumeSlowly`` |
| topics.json | ``dataVersion``, ``topicConfigTable`` |
| consumerOffset.json | ``dataVersion`` (5.x), ``groupTopicMap`` (5.x, derived, ignored on read), |
| | ``offsetTable`` |
| delayOffset.json | ``dataVersion`` (5.x), ``offsetTable`` (int level -> offset) |
| subscriptionGroup.json | ``dataVersion``, ``forbiddenTable`` (5.x), ``subscriptionGroupTable`` |

Readers accept 4.9 files (no ``stateVersion``, ``attributes``, ``dataVersion`` where noted),
quoted or unquoted integer keys, and unknown extra keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from rocketpy.common import fastjson
from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import Bean, JavaSet

PERM_INHERIT: Final = 1  # PermName
PERM_WRITE: Final = 2
PERM_READ: Final = 4
DEFAULT_QUEUE_NUMS: Final = 16  # TopicConfig.defaultReadQueueNums / defaultWriteQueueNums
TOPIC_GROUP_SEPARATOR: Final = "@"  # ConsumerOffsetManager
_NUMERIC: Final = re.compile(r"-?[0-9]+")


class TopicFilterType(StrEnum):
    """``TopicFilterType``, written by name."""

    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


# -- field readers: one place that says which JSON field was wrong -------------------------------


def _obj(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise CodecError(f"expected an object, got {type(value).__name__}", field=name)
    return value


def _int(obj: Mapping[str, Any], key: str, default: int) -> int:
    value = obj.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        # fastjson also reads numeric strings into int fields.
        if isinstance(value, str) and _NUMERIC.fullmatch(value):
            return int(value)
        raise CodecError(f"expected an integer, got {value!r}", field=key)
    return value


def _bool(obj: Mapping[str, Any], key: str, default: bool) -> bool:
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise CodecError(f"expected a boolean, got {value!r}", field=key)
    return value


def _str(obj: Mapping[str, Any], key: str, default: str) -> str:
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise CodecError(f"expected a string, got {value!r}", field=key)
    return value


def _str_map(obj: Mapping[str, Any], key: str) -> dict[str, str]:
    value = obj.get(key)
    if value is None:
        return {}
    return {str(k): str(v) for k, v in _obj(value, key).items()}


def _int_key(key: str, name: str) -> int:
    try:
        return int(key)
    except ValueError as e:
        raise CodecError(f"expected an integer key, got {key!r}", field=name) from e


def _load(text: str | bytes, name: str) -> Mapping[str, Any]:
    return _obj(fastjson.loads(text), name)


# -- DataVersion -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVersion:
    """Version stamp of a config table (``DataVersion``); equality compares all three fields.

    Attributes:
        timestamp: wall-clock ms of the last change.
        counter: incremented on every change.
        state_version: 5.x; controller mode sets it to the master epoch so the NameServer can
            reject a stale master's registration (namesrv.md section 3 step 3).
    """

    timestamp: int
    counter: int = 0
    state_version: int = 0

    def next_version(self, now_ms: int, state_version: int = 0) -> DataVersion:
        """``nextVersion(stateVersion)``: counter + 1, timestamp = now, state version replaced."""
        return DataVersion(timestamp=now_ms, counter=self.counter + 1, state_version=state_version)

    def compare(self, other: DataVersion) -> int:
        """``DataVersion.compare``: by state version, then counter, then timestamp (-1/0/1)."""
        mine = (self.state_version, self.counter, self.timestamp)
        theirs = (other.state_version, other.counter, other.timestamp)
        return (mine > theirs) - (mine < theirs)

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(counter=self.counter, stateVersion=self.state_version, timestamp=self.timestamp)

    @classmethod
    def from_json_value(cls, value: Any) -> DataVersion:
        """Read a decoded JSON object (4.9 objects have no ``stateVersion``)."""
        obj = _obj(value, "dataVersion")
        return cls(
            timestamp=_int(obj, "timestamp", 0),
            counter=_int(obj, "counter", 0),
            state_version=_int(obj, "stateVersion", 0),
        )


def encode_data_version(version: DataVersion) -> bytes:
    """Compact JSON, e.g. the QUERY_DATA_VERSION body."""
    return fastjson.dumps(version.to_json_value()).encode()


def decode_data_version(data: str | bytes) -> DataVersion:
    """Parse a DataVersion JSON body.

    Raises:
        CodecError: not JSON or a field of the wrong type.
    """
    return DataVersion.from_json_value(_load(data, "dataVersion"))


# -- TopicConfig -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfig:
    """One topic's config (``TopicConfig``); defaults are upstream's."""

    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(
            attributes=dict(self.attributes),
            order=self.order,
            perm=self.perm,
            readQueueNums=self.read_queue_nums,
            topicFilterType=self.topic_filter_type.value,
            topicName=self.topic_name,
            topicSysFlag=self.topic_sys_flag,
            writeQueueNums=self.write_queue_nums,
        )

    @classmethod
    def from_json_value(cls, value: Any, *, name: str = "") -> TopicConfig:
        """Read a decoded JSON object; ``name`` is the table key, used if ``topicName`` is
        absent."""
        obj = _obj(value, "topicConfig")
        filter_type = _str(obj, "topicFilterType", TopicFilterType.SINGLE_TAG.value)
        try:
            topic_filter_type = TopicFilterType(filter_type)
        except ValueError as e:
            raise CodecError(
                f"unknown topicFilterType {filter_type!r}", field="topicFilterType"
            ) from e
        return cls(
            topic_name=_str(obj, "topicName", name),
            read_queue_nums=_int(obj, "readQueueNums", DEFAULT_QUEUE_NUMS),
            write_queue_nums=_int(obj, "writeQueueNums", DEFAULT_QUEUE_NUMS),
            perm=_int(obj, "perm", PERM_READ | PERM_WRITE),
            topic_filter_type=topic_filter_type,
            topic_sys_flag=_int(obj, "topicSysFlag", 0),
            order=_bool(obj, "order", False),
            attributes=_str_map(obj, "attributes"),
        )

    def encode_text(self) -> str:
        """``TopicConfig.encode()``: ``name read write perm filterType attributesJson``, the
        form inside compressed REGISTER_BROKER bodies (``topicSysFlag``/``order`` not carried).
        """
        attrs = fastjson.dumps(dict(sorted(self.attributes.items())))
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
            f"{self.topic_filter_type.value} {attrs}"
        )

    @classmethod
    def decode_text(cls, text: str) -> TopicConfig:
        """``TopicConfig.decode``: at least five space-separated fields, attributes optional.

        Raises:
            CodecError: fewer than five fields or a non-numeric count.
        """
        parts = text.split(" ")
        if len(parts) < 5:
            raise CodecError(f"topic config text needs 5 fields: {text!r}", field="topicConfig")
        try:
            reads, writes, perm = int(parts[1]), int(parts[2]), int(parts[3])
            topic_filter_type = TopicFilterType(parts[4])
        except ValueError as e:
            raise CodecError(f"bad topic config text {text!r}", field="topicConfig") from e
        attributes: dict[str, str] = {}
        if len(parts) >= 6:
            attributes = _str_map({"attributes": fastjson.loads(parts[5])}, "attributes")
        return cls(
            topic_name=parts[0],
            read_queue_nums=reads,
            write_queue_nums=writes,
            perm=perm,
            topic_filter_type=topic_filter_type,
            attributes=attributes,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfigSerializeWrapper:
    """``topics.json`` and the registration body's ``topicConfigSerializeWrapper``."""

    topic_config_table: Mapping[str, TopicConfig]
    data_version: DataVersion

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean (topics in table order)."""
        return Bean(
            dataVersion=self.data_version.to_json_value(),
            topicConfigTable={k: v.to_json_value() for k, v in self.topic_config_table.items()},
        )

    @classmethod
    def from_json_value(cls, value: Any) -> TopicConfigSerializeWrapper:
        """Read a decoded JSON object."""
        obj = _obj(value, "topicConfigSerializeWrapper")
        table = _obj(obj.get("topicConfigTable") or {}, "topicConfigTable")
        return cls(
            topic_config_table={
                k: TopicConfig.from_json_value(v, name=k) for k, v in table.items()
            },
            data_version=DataVersion.from_json_value(obj.get("dataVersion") or {}),
        )


def encode_topics(wrapper: TopicConfigSerializeWrapper, *, pretty: bool = True) -> str:
    """``topics.json`` text (``TopicConfigManager.encode(prettyFormat)``)."""
    return fastjson.dumps(wrapper.to_json_value(), pretty=pretty)


def decode_topics(text: str | bytes) -> TopicConfigSerializeWrapper:
    """Parse ``topics.json`` (or a registration body's wrapper).

    Raises:
        CodecError: not JSON or a field of the wrong type.
    """
    return TopicConfigSerializeWrapper.from_json_value(_load(text, "topics"))


# -- consumerOffset.json / delayOffset.json ------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerOffsetTable:
    """``consumerOffset.json``: ``"<topic>@<group>"`` -> queue id -> committed offset."""

    offset_table: Mapping[str, Mapping[int, int]]
    data_version: DataVersion | None = None

    def group_topic_map(self) -> dict[str, list[str]]:
        """``getGroupTopicMap``: group -> topics, derived from the keys (sorted here)."""
        out: dict[str, set[str]] = {}
        for key in self.offset_table:
            parts = key.split(TOPIC_GROUP_SEPARATOR)
            if len(parts) == 2:
                out.setdefault(parts[1], set()).add(parts[0])
        return {group: sorted(topics) for group, topics in sorted(out.items())}

    def to_json_value(self) -> Bean:
        """The fastjson value of ``ConsumerOffsetManager``."""
        return Bean(
            dataVersion=self.data_version.to_json_value() if self.data_version else None,
            groupTopicMap={g: JavaSet(t) for g, t in self.group_topic_map().items()},
            offsetTable={k: dict(v) for k, v in self.offset_table.items()},
        )

    @classmethod
    def from_json_value(cls, value: Any) -> ConsumerOffsetTable:
        """Read a decoded JSON object; ``groupTopicMap`` is derived, so it is ignored."""
        obj = _obj(value, "consumerOffset")
        table = _obj(obj.get("offsetTable") or {}, "offsetTable")
        version = obj.get("dataVersion")
        return cls(
            offset_table={
                key: {
                    _int_key(q, "offsetTable"): _int({"offset": off}, "offset", 0)
                    for q, off in _obj(queues, key).items()
                }
                for key, queues in table.items()
            },
            data_version=DataVersion.from_json_value(version) if version is not None else None,
        )


def encode_consumer_offsets(table: ConsumerOffsetTable, *, pretty: bool = True) -> str:
    """``consumerOffset.json`` text; integer queue ids unquoted, as Java writes them."""
    return fastjson.dumps(table.to_json_value(), pretty=pretty)


def decode_consumer_offsets(text: str | bytes) -> ConsumerOffsetTable:
    """Parse ``consumerOffset.json`` (quoted or unquoted queue ids).

    Raises:
        CodecError: not JSON or a field of the wrong type.
    """
    return ConsumerOffsetTable.from_json_value(_load(text, "consumerOffset"))


@dataclass(frozen=True, slots=True, kw_only=True)
class DelayOffsetTable:
    """``delayOffset.json``: delay level -> consumed offset in queue ``level - 1`` of
    ``SCHEDULE_TOPIC_XXXX``."""

    offset_table: Mapping[int, int]
    data_version: DataVersion | None = None

    def to_json_value(self) -> Bean:
        """The fastjson value of ``DelayOffsetSerializeWrapper``."""
        return Bean(
            dataVersion=self.data_version.to_json_value() if self.data_version else None,
            offsetTable=dict(self.offset_table),
        )

    @classmethod
    def from_json_value(cls, value: Any) -> DelayOffsetTable:
        """Read a decoded JSON object."""
        obj = _obj(value, "delayOffset")
        table = _obj(obj.get("offsetTable") or {}, "offsetTable")
        version = obj.get("dataVersion")
        return cls(
            offset_table={
                _int_key(k, "offsetTable"): _int({"offset": v}, "offset", 0)
                for k, v in table.items()
            },
            data_version=DataVersion.from_json_value(version) if version is not None else None,
        )


def encode_delay_offsets(table: DelayOffsetTable, *, pretty: bool = True) -> str:
    """``delayOffset.json`` text."""
    return fastjson.dumps(table.to_json_value(), pretty=pretty)


def decode_delay_offsets(text: str | bytes) -> DelayOffsetTable:
    """Parse ``delayOffset.json``.

    Raises:
        CodecError: not JSON or a field of the wrong type.
    """
    return DelayOffsetTable.from_json_value(_load(text, "delayOffset"))


# -- subscriptionGroup.json ------------------------------------------------------------------------

DEFAULT_GROUP_RETRY_POLICY: Final[Mapping[str, Any]] = {"type": "CUSTOMIZED"}


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionGroupConfig:
    """One consumer group's config (``SubscriptionGroupConfig``); defaults are upstream's.

    ``group_retry_policy`` and ``subscription_data_set`` are kept as the decoded JSON so
    whatever a Java admin tool wrote there survives a rewrite.
    """

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: Mapping[str, Any] = field(
        default_factory=lambda: dict(DEFAULT_GROUP_RETRY_POLICY)
    )
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    subscription_data_set: tuple[Mapping[str, Any], ...] | None = None
    attributes: Mapping[str, str] = field(default_factory=dict)

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(
            attributes=dict(self.attributes),
            brokerId=self.broker_id,
            consumeBroadcastEnable=self.consume_broadcast_enable,
            consumeEnable=self.consume_enable,
            consumeFromMinEnable=self.consume_from_min_enable,
            consumeMessageOrderly=self.consume_message_orderly,
            consumeTimeoutMinute=self.consume_timeout_minute,
            groupName=self.group_name,
            groupRetryPolicy=_as_bean(self.group_retry_policy),
            groupSysFlag=self.group_sys_flag,
            notifyConsumerIdsChangedEnable=self.notify_consumer_ids_changed_enable,
            retryMaxTimes=self.retry_max_times,
            retryQueueNums=self.retry_queue_nums,
            subscriptionDataSet=(
                None
                if self.subscription_data_set is None
                else JavaSet(_as_bean(s) for s in self.subscription_data_set)
            ),
            whichBrokerWhenConsumeSlowly=self.which_broker_when_consume_slowly,
        )

    @classmethod
    def from_json_value(cls, value: Any, *, name: str = "") -> SubscriptionGroupConfig:
        """Read a decoded JSON object; ``name`` is the table key, used if ``groupName`` is
        absent."""
        obj = _obj(value, "subscriptionGroupConfig")
        retry = obj.get("groupRetryPolicy")
        subs = obj.get("subscriptionDataSet")
        if subs is not None and not isinstance(subs, list):
            raise CodecError("expected an array", field="subscriptionDataSet")
        return cls(
            group_name=_str(obj, "groupName", name),
            consume_enable=_bool(obj, "consumeEnable", True),
            consume_from_min_enable=_bool(obj, "consumeFromMinEnable", True),
            consume_broadcast_enable=_bool(obj, "consumeBroadcastEnable", True),
            consume_message_orderly=_bool(obj, "consumeMessageOrderly", False),
            retry_queue_nums=_int(obj, "retryQueueNums", 1),
            retry_max_times=_int(obj, "retryMaxTimes", 16),
            group_retry_policy=(
                dict(_obj(retry, "groupRetryPolicy"))
                if retry is not None
                else dict(DEFAULT_GROUP_RETRY_POLICY)
            ),
            broker_id=_int(obj, "brokerId", 0),
            which_broker_when_consume_slowly=_int(obj, "whichBrokerWhenConsumeSlowly", 1),
            notify_consumer_ids_changed_enable=_bool(obj, "notifyConsumerIdsChangedEnable", True),
            group_sys_flag=_int(obj, "groupSysFlag", 0),
            consume_timeout_minute=_int(obj, "consumeTimeoutMinute", 15),
            subscription_data_set=(
                None if subs is None else tuple(dict(_obj(s, "subscriptionDataSet")) for s in subs)
            ),
            attributes=_str_map(obj, "attributes"),
        )


def _as_bean(value: Any) -> Any:
    """Nested decoded JSON objects written back as beans (sorted keys, nulls dropped)."""
    if isinstance(value, Mapping):
        return Bean({str(k): _as_bean(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return [_as_bean(v) for v in value]
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionGroupTable:
    """``subscriptionGroup.json`` (``SubscriptionGroupManager``)."""

    subscription_group_table: Mapping[str, SubscriptionGroupConfig]
    data_version: DataVersion
    forbidden_table: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def to_json_value(self) -> Bean:
        """The fastjson value of ``SubscriptionGroupManager``."""
        return Bean(
            dataVersion=self.data_version.to_json_value(),
            forbiddenTable={k: dict(v) for k, v in self.forbidden_table.items()},
            subscriptionGroupTable={
                k: v.to_json_value() for k, v in self.subscription_group_table.items()
            },
        )

    @classmethod
    def from_json_value(cls, value: Any) -> SubscriptionGroupTable:
        """Read a decoded JSON object (4.9: no ``forbiddenTable``)."""
        obj = _obj(value, "subscriptionGroup")
        table = _obj(obj.get("subscriptionGroupTable") or {}, "subscriptionGroupTable")
        forbidden = _obj(obj.get("forbiddenTable") or {}, "forbiddenTable")
        return cls(
            subscription_group_table={
                k: SubscriptionGroupConfig.from_json_value(v, name=k) for k, v in table.items()
            },
            data_version=DataVersion.from_json_value(obj.get("dataVersion") or {}),
            forbidden_table={
                group: {t: _int({"perm": p}, "perm", 0) for t, p in _obj(topics, group).items()}
                for group, topics in forbidden.items()
            },
        )


def encode_subscription_groups(table: SubscriptionGroupTable, *, pretty: bool = True) -> str:
    """``subscriptionGroup.json`` text."""
    return fastjson.dumps(table.to_json_value(), pretty=pretty)


def decode_subscription_groups(text: str | bytes) -> SubscriptionGroupTable:
    """Parse ``subscriptionGroup.json``.

    Raises:
        CodecError: not JSON or a field of the wrong type.
    """
    return SubscriptionGroupTable.from_json_value(_load(text, "subscriptionGroup"))
