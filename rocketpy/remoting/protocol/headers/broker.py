"""Typed custom headers of the client <-> broker requests: send, pull, consumer manage, admin.

Owns: one frozen dataclass per upstream ``CommandCustomHeader`` the broker decodes or encodes,
with the extFields keys as upstream's Java field names (codes.md section 2, remoting.md section 4),
and :func:`send_header_from_v2`/:func:`send_header_to_v2` (``SendMessageRequestHeaderV2``'s
single-letter form). Mirrors ``remoting/protocol/header/*`` of apache/rocketmq 5.3.x. Must not:
carry behaviour; processors decide what fields mean. Pure.

Mandatory fields (``@CFNotNull`` upstream) have no default, so :func:`from_ext` raises
``MissingHeaderField`` naming them (answered as SYSTEM_ERROR). Fields inherited from
``RpcRequestHeader`` (``ns``, ``nsd``, ``bname``, ``oway``, ``lo``) are ignored except ``bname``
where a client uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rocketpy.remoting.protocol.headers.base import (
    EMPTY_EXT,
    ext_decoder,
    from_ext,
    wire,
)

# -- send ------------------------------------------------------------------------------------


# Not frozen: one is decoded per send, and a frozen 14-field ``__init__`` costs ~1.2 us more
# (a quarter of the header decode). Treat as read-only.
@dataclass(slots=True, kw_only=True)
class SendMessageRequestHeader:
    """``SendMessageRequestHeader`` (SEND_MESSAGE 10; the decoded form of every send)."""

    producer_group: str = wire("producerGroup")
    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic")
    default_topic_queue_nums: int = wire("defaultTopicQueueNums")
    queue_id: int = wire("queueId")
    sys_flag: int = wire("sysFlag")
    born_timestamp: int = wire("bornTimestamp")
    flag: int = wire("flag")
    properties: str | None = wire("properties", default=None)
    reconsume_times: int | None = wire("reconsumeTimes", default=None)
    unit_mode: bool | None = wire("unitMode", default=None)
    batch: bool | None = wire("batch", default=None)
    max_reconsume_times: int | None = wire("maxReconsumeTimes", default=None)
    bname: str | None = wire("bname", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class SendMessageRequestHeaderV2:
    """``SendMessageRequestHeaderV2`` (SEND_MESSAGE_V2 310, SEND_BATCH_MESSAGE 320): the same
    fields under the keys ``a``..``n`` to keep frames small."""

    a: str = wire("a")
    b: str = wire("b")
    c: str = wire("c")
    d: int = wire("d")
    e: int = wire("e")
    f: int = wire("f")
    g: int = wire("g")
    h: int = wire("h")
    i: str | None = wire("i", default=None)
    j: int | None = wire("j", default=None)
    k: bool | None = wire("k", default=None)
    l: int | None = wire("l", default=None)  # noqa: E741 - upstream's field name
    m: bool | None = wire("m", default=None)
    n: str | None = wire("n", default=None)


def send_header_from_v2(v2: SendMessageRequestHeaderV2) -> SendMessageRequestHeader:
    """``SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1``."""
    return SendMessageRequestHeader(
        producer_group=v2.a,
        topic=v2.b,
        default_topic=v2.c,
        default_topic_queue_nums=v2.d,
        queue_id=v2.e,
        sys_flag=v2.f,
        born_timestamp=v2.g,
        flag=v2.h,
        properties=v2.i,
        reconsume_times=v2.j,
        unit_mode=v2.k,
        max_reconsume_times=v2.l,
        batch=v2.m,
        bname=v2.n,
    )


def send_header_to_v2(v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
    """``SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2`` (what Java clients send
    with ``sendSmartMsg=true``)."""
    return SendMessageRequestHeaderV2(
        a=v1.producer_group,
        b=v1.topic,
        c=v1.default_topic,
        d=v1.default_topic_queue_nums,
        e=v1.queue_id,
        f=v1.sys_flag,
        g=v1.born_timestamp,
        h=v1.flag,
        i=v1.properties,
        j=v1.reconsume_times,
        k=v1.unit_mode,
        l=v1.max_reconsume_times,
        m=v1.batch,
        n=v1.bname,
    )


def decode_send_header(code: int, ext: dict[str, str] | None) -> SendMessageRequestHeader:
    """The V1 form of a send request's header: V2 keys for codes 310/320, V1 keys for 10.

    Mirrors ``AbstractSendMessageProcessor.parseRequestHeader``.
    """
    if code in (310, 320):
        # Straight into the V1 form (what send_header_from_v2 does, without the V2 object).
        return _DECODE_V2(EMPTY_EXT if ext is None else ext)
    return from_ext(SendMessageRequestHeader, ext)


#: The V2 key of each V1 field, in V1's field order (createSendMessageRequestHeaderV1).
_V2_KEYS: Final = ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "l", "n")
#: SEND_MESSAGE_V2's extFields into the V1 header (``from_ext_keys``'s decoder, kept).
_DECODE_V2: Final = ext_decoder(SendMessageRequestHeader, _V2_KEYS)


@dataclass(frozen=True, slots=True, kw_only=True)
class SendMessageResponseHeader:
    """``SendMessageResponseHeader``."""

    msg_id: str = wire("msgId")
    queue_id: int = wire("queueId")
    queue_offset: int = wire("queueOffset")
    transaction_id: str | None = wire("transactionId", default=None)
    batch_uniq_id: str | None = wire("batchUniqId", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerSendMsgBackRequestHeader:
    """``ConsumerSendMsgBackRequestHeader`` (CONSUMER_SEND_MSG_BACK 36)."""

    offset: int = wire("offset")
    group: str = wire("group")
    delay_level: int = wire("delayLevel")
    origin_msg_id: str | None = wire("originMsgId", default=None)
    origin_topic: str | None = wire("originTopic", default=None)
    unit_mode: bool = wire("unitMode", default=False)
    max_reconsume_times: int | None = wire("maxReconsumeTimes", default=None)
    bname: str | None = wire("bname", default=None)


# -- pull ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PullMessageRequestHeader:
    """``PullMessageRequestHeader`` (PULL_MESSAGE 11, LITE_PULL_MESSAGE 361)."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    queue_offset: int = wire("queueOffset")
    max_msg_nums: int = wire("maxMsgNums")
    sys_flag: int = wire("sysFlag")
    commit_offset: int = wire("commitOffset")
    suspend_timeout_millis: int = wire("suspendTimeoutMillis")
    sub_version: int = wire("subVersion")
    subscription: str | None = wire("subscription", default=None)
    expression_type: str | None = wire("expressionType", default=None)
    max_msg_bytes: int | None = wire("maxMsgBytes", default=None)
    bname: str | None = wire("bname", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class PullMessageResponseHeader:
    """``PullMessageResponseHeader``: always filled, the Java client unboxes every field."""

    suggest_which_broker_id: int = wire("suggestWhichBrokerId")
    next_begin_offset: int = wire("nextBeginOffset")
    min_offset: int = wire("minOffset")
    max_offset: int = wire("maxOffset")
    offset_delta: int | None = wire("offsetDelta", default=None)
    topic_sys_flag: int | None = wire("topicSysFlag", default=None)
    group_sys_flag: int | None = wire("groupSysFlag", default=None)
    forbidden_type: int | None = wire("forbiddenType", default=None)


# -- query / view ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryMessageRequestHeader:
    """``QueryMessageRequestHeader`` (QUERY_MESSAGE 12)."""

    topic: str = wire("topic")
    key: str = wire("key")
    max_num: int = wire("maxNum")
    begin_timestamp: int = wire("beginTimestamp")
    end_timestamp: int = wire("endTimestamp")


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryMessageResponseHeader:
    """``QueryMessageResponseHeader``."""

    index_last_update_timestamp: int = wire("indexLastUpdateTimestamp")
    index_last_update_phyoffset: int = wire("indexLastUpdatePhyoffset")


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewMessageRequestHeader:
    """``ViewMessageRequestHeader`` (VIEW_MESSAGE_BY_ID 33): a commit-log offset."""

    offset: int = wire("offset")
    topic: str | None = wire("topic", default=None)


# -- consumer manage -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupRequestHeader:
    """Headers that only carry ``consumerGroup``: GET_CONSUMER_LIST_BY_GROUP 38,
    GET_CONSUMER_CONNECTION_LIST 203, NOTIFY_CONSUMER_IDS_CHANGED 40."""

    consumer_group: str = wire("consumerGroup")


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryConsumerOffsetRequestHeader:
    """``QueryConsumerOffsetRequestHeader`` (14)."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    set_zero_if_not_found: bool | None = wire("setZeroIfNotFound", default=None)
    bname: str | None = wire("bname", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateConsumerOffsetRequestHeader:
    """``UpdateConsumerOffsetRequestHeader`` (15)."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    commit_offset: int = wire("commitOffset")
    bname: str | None = wire("bname", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetResponseHeader:
    """``offset`` responses: QUERY_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, SEARCH_OFFSET."""

    offset: int = wire("offset")


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueRequestHeader:
    """``topic`` + ``queueId``: GET_MIN_OFFSET 31, GET_EARLIEST_MSG_STORETIME 32."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    bname: str | None = wire("bname", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMaxOffsetRequestHeader:
    """``GetMaxOffsetRequestHeader`` (30). ``committed`` absent (None) means upstream's default,
    true; our client leaves it off the wire as it always has."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    committed: bool | None = wire("committed", default=None)
    bname: str | None = wire("bname", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchOffsetRequestHeader:
    """``SearchOffsetRequestHeader`` (29); ``boundaryType`` ``LOWER``/``UPPER`` (5.x)."""

    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    timestamp: int = wire("timestamp")
    boundary_type: str | None = wire("boundaryType", default=None)
    bname: str | None = wire("bname", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class GetEarliestMsgStoretimeResponseHeader:
    """``GetEarliestMsgStoretimeResponseHeader``."""

    timestamp: int = wire("timestamp")


# -- client manage ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterClientRequestHeader:
    """``UnregisterClientRequestHeader`` (35)."""

    client_id: str = wire("clientID")
    producer_group: str | None = wire("producerGroup", default=None)
    consumer_group: str | None = wire("consumerGroup", default=None)


# -- admin -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicRequestHeader:
    """``CreateTopicRequestHeader`` (UPDATE_AND_CREATE_TOPIC 17)."""

    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic")
    read_queue_nums: int = wire("readQueueNums")
    write_queue_nums: int = wire("writeQueueNums")
    perm: int = wire("perm")
    topic_filter_type: str = wire("topicFilterType")
    topic_sys_flag: int | None = wire("topicSysFlag", default=None)
    order: bool = wire("order", default=False)
    attributes: str | None = wire("attributes", default=None)
    force: bool | None = wire("force", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRequestHeader:
    """Headers that only carry ``topic``: DELETE_TOPIC_IN_BROKER 215, GET_TOPIC_STATS_INFO 202,
    QUERY_TOPIC_CONSUME_BY_WHO 300, GET_TOPIC_CONFIG 351."""

    topic: str = wire("topic")


@dataclass(frozen=True, slots=True, kw_only=True)
class GetSubscriptionGroupConfigRequestHeader:
    """``GetSubscriptionGroupConfigRequestHeader`` (GET_SUBSCRIPTIONGROUP_CONFIG 352)."""

    group: str = wire("group")


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumeStatsRequestHeader:
    """``GetConsumeStatsRequestHeader`` (208)."""

    consumer_group: str = wire("consumerGroup")
    topic: str | None = wire("topic", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSubscriptionGroupRequestHeader:
    """``DeleteSubscriptionGroupRequestHeader`` (207)."""

    group_name: str = wire("groupName")
    clean_offset: bool = wire("cleanOffset", default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetOffsetRequestHeader:
    """``ResetOffsetRequestHeader`` (INVOKE_BROKER_TO_RESET_OFFSET 222, and the broker's
    RESET_CONSUMER_CLIENT_OFFSET 220 to clients)."""

    topic: str = wire("topic")
    group: str = wire("group")
    timestamp: int = wire("timestamp")
    is_force: bool = wire("isForce")
    queue_id: int | None = wire("queueId", default=None)
    offset: int | None = wire("offset", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class GetBrokerConfigResponseHeader:
    """``GetBrokerConfigResponseHeader``: the config's DataVersion JSON."""

    version: str = wire("version")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExchangeHAInfoHeader:
    """``ExchangeHAInfoRequestHeader`` / ``ExchangeHAInfoResponseHeader`` (906
    EXCHANGE_BROKER_HA_INFO, broker -> broker; both carry the same three optional fields)."""

    master_ha_address: str | None = wire("masterHaAddress", default=None)
    master_flush_offset: int | None = wire("masterFlushOffset", default=None)
    master_address: str | None = wire("masterAddress", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewBrokerStatsDataRequestHeader:
    """``ViewBrokerStatsDataRequestHeader`` (VIEW_BROKER_STATS_DATA 315)."""

    stats_name: str = wire("statsName")
    stats_key: str = wire("statsKey")
