"""Admin requests: topics (17, 215, 21, 351, 202), subscription groups (200, 201, 352, 207, 203),
stats (28, 208), metadata sync bodies (43, 45) and offset reset (222).

Owns: the admin request family as far as ``mqadmin`` and slave metadata sync use it. Mirrors
``broker/processor/AdminBrokerProcessor`` and ``client/net/Broker2Client.resetOffset`` (5.3.x;
codes.md sections 2 and 5). Broker config get/update (25/26) live in ``broker_config.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Final

import structlog

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.store_api import BrokerStore
from rocketpy.common import fastjson
from rocketpy.common.attributes import ADD_SIGN, InvalidAttributeError, parse_to_map
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.fastjson import Bean
from rocketpy.common.topic_message_type import MESSAGE_TYPE_KEY, TopicMessageType
from rocketpy.remoting.protocol.body.broker import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    MessageQueue,
    OffsetWrapper,
    TopicOffset,
    encode_consume_stats,
    encode_consumer_connection,
    encode_kv_table,
    encode_reset_offset_body,
    encode_topic_stats,
)
from rocketpy.remoting.protocol.body.config_shapes import (
    TOPIC_GROUP_SEPARATOR,
    DataVersion,
    DelayOffsetTable,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicFilterType,
    encode_consumer_offsets,
    encode_delay_offsets,
    encode_subscription_groups,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.broker import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GroupRequestHeader,
    ResetOffsetRequestHeader,
    TopicRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from rocketpy.remoting.transport.dispatch import Processor, RequestContext

log = structlog.get_logger(__name__)

V3_0_7_SNAPSHOT: Final = (
    24  # MQVersion ordinal from which clients accept RESET_CONSUMER_CLIENT_OFFSET
)


def _check_queues_and_perm(h: CreateTopicRequestHeader) -> str | None:
    """Negative queue counts or perm bits beyond PermName's four (PRIORITY|R|W|INHERIT) would
    be stored and then break routes and queue loops. Our decision: upstream stores them as
    given; we refuse them with INVALID_PARAMETER."""
    if h.read_queue_nums < 0 or h.write_queue_nums < 0:
        return (
            f"queue nums must not be negative: readQueueNums={h.read_queue_nums}, "
            f"writeQueueNums={h.write_queue_nums}"
        )
    if not 0 <= h.perm <= 0xF:
        return f"perm {h.perm} is not a combination of PermName bits (0..15)"
    return None


class AdminProcessor:
    """Topic/group administration, stats and metadata bodies."""

    def __init__(self, rt: BrokerRuntime, *, delay_offsets: Callable[[], DelayOffsetTable]) -> None:
        """Args: ``rt`` the shared broker state; ``delay_offsets`` the schedule service's
        progress (GET_ALL_DELAY_OFFSET)."""
        self._rt = rt
        self._delay_offsets = delay_offsets
        self._mapping_version = DataVersion(timestamp=rt.clock.wall_ms())

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_groups,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.get_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
        }

    # -- stats ----------------------------------------------------------------------------

    async def view_broker_stats_data(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``ViewBrokerStatsData``: minute/hour/day sum and TPS of one stats item (statsAll);
        an item never counted answers SYSTEM_ERROR, as upstream."""
        h = from_ext(ViewBrokerStatsDataRequestHeader, request.ext_fields)
        data = self._rt.stats.items.stats_data(h.stats_name, h.stats_key)
        if data is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"The stats <{h.stats_name}> <{h.stats_key}> not exist"
            )
        # Plain JSON: the body holds doubles (tps), which rocketpy's fastjson writer refuses;
        # Python's float repr is the shortest round-trip form, as Java's Double.toString.
        body = json.dumps(data, separators=(",", ":"))
        return request.make_response(ResponseCode.SUCCESS, body=body.encode("utf-8"))

    async def query_topic_consume_by_who(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``queryTopicConsumeByWho``: groups online and subscribed to the topic, plus groups
        with committed offsets in it (``GroupList`` body)."""
        topic = from_ext(TopicRequestHeader, request.ext_fields).topic
        rt = self._rt
        groups = {g for g, info in rt.consumers.groups.items() if topic in info.subscriptions}
        for key in rt.offsets.offset_table:
            t, _, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
            if t == topic:
                groups.add(group)
        body = fastjson.dumps({"groupList": sorted(groups)})
        return request.make_response(ResponseCode.SUCCESS, body=body.encode("utf-8"))

    # -- topics --------------------------------------------------------------------------

    async def update_and_create_topic(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``updateAndCreateTopic``: persist and re-register with the NameServers."""
        h = from_ext(CreateTopicRequestHeader, request.ext_fields)
        log.info(
            "Broker receive request to update or create topic", topic=h.topic, peer=ctx.channel.peer
        )
        remark = tv.validate_topic(h.topic)
        if remark is not None:
            return request.make_response(ResponseCode.INVALID_PARAMETER, remark)
        if self._rt.topics.is_system_topic(h.topic):
            return request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"The topic[{h.topic}] is conflict with system topic.",
            )
        remark = _check_queues_and_perm(h)
        if remark is not None:
            return request.make_response(ResponseCode.INVALID_PARAMETER, remark)
        try:
            filter_type = TopicFilterType(h.topic_filter_type)
        except ValueError as e:
            return request.make_response(ResponseCode.INVALID_PARAMETER, str(e))
        try:
            modification = parse_to_map(h.attributes)
            if not self._rt.config.enable_mixed_message_type and (
                modification.get(ADD_SIGN + MESSAGE_TYPE_KEY) == TopicMessageType.MIXED
            ):
                return request.make_response(
                    ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported."
                )
            self._rt.topics.update(
                TopicConfig(
                    topic_name=h.topic,
                    read_queue_nums=h.read_queue_nums,
                    write_queue_nums=h.write_queue_nums,
                    perm=h.perm,
                    topic_filter_type=filter_type,
                    topic_sys_flag=h.topic_sys_flag or 0,
                    order=h.order,
                ),
                modification,
            )
        except InvalidAttributeError as e:
            # upstream: the RuntimeException is caught as "Update / create topic failed"
            log.warning("Update / create topic failed", topic=h.topic, reason=str(e))
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(e))
        return request.make_response(ResponseCode.SUCCESS)

    async def delete_topic(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """``deleteTopic``: config, offsets and consume queues of the topic."""
        h = from_ext(TopicRequestHeader, request.ext_fields)
        if not h.topic.strip():
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The specified topic is blank.")
        if self._rt.topics.is_system_topic(h.topic):
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"The topic[{h.topic}] is conflict with system topic."
            )
        self._rt.topics.delete(h.topic)
        self._rt.offsets.remove_topic(h.topic)
        await self._rt.store.delete_topics({h.topic})
        return request.make_response(ResponseCode.SUCCESS)

    async def get_all_topic_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getAllTopicConfig``: ``TopicConfigAndMappingSerializeWrapper`` (no static topics)."""
        wrapper = self._rt.topics.wrapper()
        body = Bean(
            dataVersion=wrapper.data_version.to_json_value(),
            mappingDataVersion=self._mapping_version.to_json_value(),
            topicConfigTable={k: v.to_json_value() for k, v in wrapper.topic_config_table.items()},
            topicQueueMappingDetailMap={},
            topicQueueMappingInfoMap={},
        )
        return request.make_response(
            ResponseCode.SUCCESS, body=fastjson.dumps(body).encode("utf-8")
        )

    async def get_topic_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getTopicConfig``: ``TopicConfigAndQueueMapping`` (a TopicConfig; no mapping)."""
        h = from_ext(TopicRequestHeader, request.ext_fields)
        found = self._rt.topics.select(h.topic)
        if found is None:
            log.error("No topic in this broker", topic=h.topic, peer=ctx.channel.peer)
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}"
            )
        return request.make_response(
            ResponseCode.SUCCESS, body=fastjson.dumps(found.to_json_value()).encode("utf-8")
        )

    async def get_topic_stats_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getTopicStatsInfo``: min/max offset and last store time per write queue."""
        h = from_ext(TopicRequestHeader, request.ext_fields)
        found = self._rt.topics.select(h.topic)
        if found is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist"
            )
        store = self._rt.store
        table: dict[MessageQueue, TopicOffset] = {}
        for qid in range(found.write_queue_nums):
            low = max(0, store.min_offset_in_queue(h.topic, qid))
            high = max(0, store.max_offset_in_queue(h.topic, qid))
            last = store.message_store_time(h.topic, qid, high - 1) if high > 0 else 0
            table[self._mq(h.topic, qid)] = TopicOffset(
                min_offset=low, max_offset=high, last_update_timestamp=max(0, last)
            )
        return request.make_response(ResponseCode.SUCCESS, body=encode_topic_stats(table))

    def _mq(self, topic: str, queue_id: int) -> MessageQueue:
        return MessageQueue(topic=topic, broker_name=self._rt.config.broker_name, queue_id=queue_id)

    # -- groups --------------------------------------------------------------------------

    async def update_and_create_group(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``updateAndCreateSubscriptionGroup``: body is a ``SubscriptionGroupConfig``."""
        if not request.body:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "the request body is empty")
        group = SubscriptionGroupConfig.from_json_value(fastjson.loads(request.body))
        if not tv.is_group_name_valid(group.group_name):
            return request.make_response(
                ResponseCode.INVALID_PARAMETER, f"the group name is illegal: {group.group_name}"
            )
        self._rt.groups.update(group)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_all_groups(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getAllSubscriptionGroup``: the manager's JSON, compact."""
        body = encode_subscription_groups(self._rt.groups.snapshot(), pretty=False)
        return request.make_response(ResponseCode.SUCCESS, body=body.encode("utf-8"))

    async def get_subscription_group(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getSubscriptionGroup``: one ``SubscriptionGroupConfig`` as compact JSON. Like
        upstream it goes through ``findSubscriptionGroupConfig``, so with
        ``autoCreateSubscriptionGroup`` an unknown (legal) group is created and returned."""
        h = from_ext(GetSubscriptionGroupConfigRequestHeader, request.ext_fields)
        found = self._rt.groups.find(h.group)
        if found is None:
            log.error("No group in this broker", group=h.group, peer=ctx.channel.peer)
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker"
            )
        body = fastjson.dumps(found.to_json_value())
        return request.make_response(ResponseCode.SUCCESS, body=body.encode("utf-8"))

    async def delete_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """``deleteSubscriptionGroup`` (optionally its offsets)."""
        h = from_ext(DeleteSubscriptionGroupRequestHeader, request.ext_fields)
        self._rt.groups.delete(h.group_name)
        if h.clean_offset:
            self._rt.offsets.remove_group(h.group_name)
        return request.make_response(ResponseCode.SUCCESS)

    async def get_consumer_connection_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getConsumerConnectionList``."""
        h = from_ext(GroupRequestHeader, request.ext_fields)
        info = self._rt.consumers.group(h.consumer_group)
        if info is None:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"the consumer group[{h.consumer_group}] not online",
            )
        conn = ConsumerConnection(
            connections=tuple(
                Connection(
                    client_id=c.client_id,
                    client_addr=ch.peer,
                    language=c.language,
                    version=c.version,
                )
                for ch, c in info.channels.items()
            ),
            subscription_table=dict(info.subscriptions),
            consume_type=info.consume_type,
            message_model=info.message_model,
            consume_from_where=info.consume_from_where,
        )
        return request.make_response(ResponseCode.SUCCESS, body=encode_consumer_connection(conn))

    # -- stats ---------------------------------------------------------------------------

    async def get_broker_runtime_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getBrokerRuntimeInfo``: a KVTable of string values."""
        rt = self._rt
        table = {
            "brokerVersionDesc": "V5_3_3",
            "brokerVersion": "479",
            "brokerActive": "true",
            "startAcceptSendRequestTimeStamp": str(rt.config.start_accept_send_request_time_stamp),
        }
        table.update(rt.stats.runtime_info())
        # 4.9's mqadmin reads the misspelt key
        table["getTransferedTps"] = table["getTransferredTps"]
        for family in ("send", "pull", "query"):
            gate = rt.gates.get(family)
            if gate is not None:
                table[f"{family}ThreadPoolQueueSize"] = str(gate.waiting)
                table[f"{family}ThreadPoolQueueCapacity"] = str(gate.max_waiting)
                table[f"{family}ThreadPoolQueueHeadWaitTimeMills"] = str(gate.head_wait_ms())
        table.update(rt.store.runtime_info())
        return request.make_response(ResponseCode.SUCCESS, body=encode_kv_table(table))

    async def get_consume_stats(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getConsumeStats``: per queue broker/consumer/pull offsets and last consumed time."""
        h = from_ext(GetConsumeStatsRequestHeader, request.ext_fields)
        rt = self._rt
        group = h.consumer_group
        topics = (
            {h.topic} if h.topic and h.topic.strip() else rt.offsets.which_topic_by_consumer(group)
        )
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0
        group_info = rt.consumers.group(group)
        for topic in sorted(topics):
            topic_config = rt.topics.select(topic)
            if topic_config is None:
                continue
            if group_info and group_info.subscriptions and topic not in group_info.subscriptions:
                continue
            for qid in range(topic_config.read_queue_nums):
                table[self._mq(topic, qid)] = _offset_wrapper(rt, rt.store, group, topic, qid)
            tps += rt.stats.group_get_tps(group, topic)
        stats = ConsumeStats(offset_table=table, consume_tps=tps)
        return request.make_response(ResponseCode.SUCCESS, body=encode_consume_stats(stats))

    # -- metadata sync bodies ------------------------------------------------------------

    async def get_all_consumer_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getAllConsumerOffset``: ``consumerOffset.json`` content, compact."""
        body = encode_consumer_offsets(self._rt.offsets.snapshot(), pretty=False)
        return request.make_response(ResponseCode.SUCCESS, body=body.encode("utf-8"))

    async def get_all_delay_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``getAllDelayOffset``: ``delayOffset.json`` content, compact."""
        body = encode_delay_offsets(self._delay_offsets(), pretty=False)
        return request.make_response(ResponseCode.SUCCESS, body=body.encode("utf-8"))

    # -- offset reset --------------------------------------------------------------------

    async def reset_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """``resetOffset``: server-side (``useServerSideResetOffset``, default) or by telling
        every online consumer (RESET_CONSUMER_CLIENT_OFFSET)."""
        h = from_ext(ResetOffsetRequestHeader, request.ext_fields)
        log.info(
            "[reset-offset] reset offset started",
            topic=h.topic,
            group=h.group,
            timestamp=h.timestamp,
            queue_id=h.queue_id,
            offset=h.offset,
            peer=ctx.channel.peer,
        )
        if self._rt.config.use_server_side_reset_offset:
            return self._reset_in_broker(request, h)
        return await self._reset_by_clients(request, h)

    def _reset_in_broker(
        self, request: RemotingCommand, h: ResetOffsetRequestHeader
    ) -> RemotingCommand:
        rt = self._rt
        if rt.is_slave:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker"
            )
        topic_config = rt.topics.select(h.topic)
        if topic_config is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"Topic {h.topic} does not exist"
            )
        if not rt.groups.contains(h.group):
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {h.group} does not exist"
            )
        targets: dict[int, int] = {}
        queue_id = -1 if h.queue_id is None else h.queue_id
        if queue_id >= 0:
            if h.offset is not None and h.offset != -1:
                low = rt.store.min_offset_in_queue(h.topic, queue_id)
                high = rt.store.max_offset_in_queue(h.topic, queue_id)
                if (low >= 0 and h.offset < low) or h.offset > high + 1:
                    return request.make_response(
                        ResponseCode.SYSTEM_ERROR,
                        f"Target offset {h.offset} not in consume queue range [{low}-{high}]",
                    )
                targets[queue_id] = h.offset
            else:
                targets[queue_id] = rt.store.offset_in_queue_by_time(
                    h.topic, queue_id, h.timestamp, False
                )
        else:
            for qid in range(topic_config.read_queue_nums):
                targets[qid] = rt.store.offset_in_queue_by_time(h.topic, qid, h.timestamp, False)
        if not targets:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "No queues to reset.")
        for qid, offset in targets.items():
            rt.offsets.assign_reset_offset(h.topic, h.group, qid, offset)
        body = encode_reset_offset_body({self._mq(h.topic, q): o for q, o in targets.items()})
        log.info("Reset offset", topic=h.topic, group=h.group, queues=targets)
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def _reset_by_clients(
        self, request: RemotingCommand, h: ResetOffsetRequestHeader
    ) -> RemotingCommand:
        """``Broker2Client.resetOffset``."""
        rt = self._rt
        topic_config = rt.topics.select(h.topic)
        if topic_config is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}",
            )
        offsets: dict[MessageQueue, int] = {}
        for qid in range(topic_config.write_queue_nums):
            consumer_offset = rt.offsets.query_offset(h.group, h.topic, qid)
            if consumer_offset == -1:
                return request.make_response(
                    ResponseCode.SYSTEM_ERROR, f"THe consumer group <{h.group}> not exist"
                )
            if h.timestamp == -1:
                target = rt.store.max_offset_in_queue(h.topic, qid)
            else:
                target = rt.store.offset_in_queue_by_time(h.topic, qid, h.timestamp, False)
            target = max(0, target)
            offsets[self._mq(h.topic, qid)] = (
                target if h.is_force or target < consumer_offset else consumer_offset
            )
        info = rt.consumers.group(h.group)
        if info is None or not info.channels:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {h.group} Topic: {h.topic} "
                f"Timestamp: {h.timestamp}",
            )
        body = encode_reset_offset_body(offsets)
        for channel, client in info.channels.items():
            if client.version < V3_0_7_SNAPSHOT:
                return request.make_response(
                    ResponseCode.SYSTEM_ERROR,
                    f"the client does not support this feature. version={client.version}",
                )
            notify = RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                to_ext(
                    ResetOffsetRequestHeader(
                        topic=h.topic, group=h.group, timestamp=h.timestamp, is_force=h.is_force
                    )
                ),
                body,
                oneway=True,
            )
            channel.invoke_oneway(notify)
            log.info(
                "[reset-offset] reset offset success", group=h.group, client_id=client.client_id
            )
        return request.make_response(ResponseCode.SUCCESS, body=body)


def _offset_wrapper(
    rt: BrokerRuntime, store: BrokerStore, group: str, topic: str, qid: int
) -> OffsetWrapper:
    broker_offset = max(0, store.max_offset_in_queue(topic, qid))
    consumer_offset = max(0, rt.offsets.query_offset(group, topic, qid))
    pull_offset = rt.offsets.query_pull_offset(group, topic, qid)
    last = 0
    if consumer_offset > 0:
        last = max(0, store.message_store_time(topic, qid, consumer_offset - 1))
    return OffsetWrapper(
        broker_offset=broker_offset,
        consumer_offset=consumer_offset,
        pull_offset=max(consumer_offset, pull_offset),
        last_timestamp=last,
    )
