"""HEART_BEAT (34), UNREGISTER_CLIENT (35), CHECK_CLIENT_CONFIG (46).

Owns: turning heartbeats into producer/consumer registrations (creating the group's
``%RETRY%`` topic so it becomes routable) and removing them. Mirrors
``broker/processor/ClientManageProcessor`` (client-flows.md section 3).

Decided: a consumer group whose subscription group does not exist and cannot be auto-created is
skipped (client-flows.md section 3 step 1). With heartbeat v2 (non-zero fingerprint) and
``withoutSub`` the stored subscriptions are kept; ``IS_SUB_CHANGE`` asks the client for a full
heartbeat when this broker has none for the group.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.client_manager import ClientChannelInfo
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.body.broker import decode_check_client_request
from rocketpy.remoting.protocol.body.config_shapes import PERM_READ, PERM_WRITE
from rocketpy.remoting.protocol.body.heartbeat import (
    EXPRESSION_TAG,
    ConsumerData,
    HeartbeatData,
    decode_heartbeat,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext
from rocketpy.remoting.protocol.headers.broker import UnregisterClientRequestHeader
from rocketpy.remoting.transport.dispatch import Processor, RequestContext

log = structlog.get_logger(__name__)

IS_SUPPORT_HEART_BEAT_V2 = "IS_SUPPORT_HEART_BEAT_V2"
IS_SUB_CHANGE = "IS_SUB_CHANGE"


class ClientManageProcessor:
    """Client registration requests."""

    def __init__(self, rt: BrokerRuntime) -> None:
        """Args: ``rt`` the shared broker state."""
        self._rt = rt

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
        }

    async def heart_beat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """``heartBeat`` / ``heartBeatV2``."""
        data = decode_heartbeat(request.body)
        info = ClientChannelInfo(
            channel=ctx.channel,
            client_id=data.client_id,
            language=request.language,
            version=request.version,
        )
        sub_change = False
        for consumer in data.consumer_data_set:
            sub_change |= self._register_consumer(data, consumer, info)
        for group in data.producer_groups:
            self._rt.producers.register_producer(
                group,
                ClientChannelInfo(
                    channel=ctx.channel,
                    client_id=data.client_id,
                    language=request.language,
                    version=request.version,
                ),
            )
        v2 = data.heartbeat_fingerprint != 0
        return request.make_response(
            ResponseCode.SUCCESS,
            ext_fields={
                IS_SUPPORT_HEART_BEAT_V2: "true",
                IS_SUB_CHANGE: "true" if (sub_change or not v2) else "false",
            },
        )

    def _register_consumer(
        self, data: HeartbeatData, consumer: ConsumerData, info: ClientChannelInfo
    ) -> bool:
        rt = self._rt
        group_config = rt.groups.find(consumer.group_name)
        if group_config is None:
            log.warning("heartbeat: subscription group not exist", group=consumer.group_name)
            return False
        has_order_sub = any(
            rt.topics.is_order_topic(s.topic) for s in consumer.subscription_data_set
        )
        rt.topics.create_in_send_back(
            tv.retry_topic(consumer.group_name),
            group_config.retry_queue_nums,
            PERM_READ | PERM_WRITE,
            order=has_order_sub,
        )
        keep_subs = data.heartbeat_fingerprint != 0 and data.without_sub
        existing = rt.consumers.group(consumer.group_name)
        changed = rt.consumers.register_consumer(
            consumer.group_name,
            ClientChannelInfo(
                channel=info.channel,
                client_id=info.client_id,
                language=info.language,
                version=info.version,
            ),
            consume_type=consumer.consume_type,
            message_model=consumer.message_model,
            consume_from_where=consumer.consume_from_where,
            subscriptions=consumer.subscription_data_set,
            notify=group_config.notify_consumer_ids_changed_enable,
            update_subscription=not keep_subs,
        )
        if changed:
            log.info(
                "registerConsumer info changed",
                group=consumer.group_name,
                client_id=data.client_id,
                peer=info.channel.peer,
            )
        return changed or (keep_subs and (existing is None or not existing.subscriptions))

    async def unregister_client(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``unregisterClient``: drop the producer and/or consumer registration now."""
        header = from_ext(UnregisterClientRequestHeader, request.ext_fields)
        if header.producer_group is not None:
            self._rt.producers.unregister_producer(header.producer_group, ctx.channel)
        if header.consumer_group is not None:
            group_config = self._rt.groups.find(header.consumer_group)
            notify = (
                True if group_config is None else group_config.notify_consumer_ids_changed_enable
            )
            self._rt.consumers.unregister_consumer(
                header.consumer_group, ctx.channel, notify=notify
            )
        return request.make_response(ResponseCode.SUCCESS)

    async def check_client_config(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``checkClientConfig``: TAG filters are fine; SQL92 needs ``enablePropertyFilter``,
        which this broker does not implement."""
        body = decode_check_client_request(request.body)
        sub = body.subscription_data
        if sub is not None and sub.expression_type != EXPRESSION_TAG:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {sub.expression_type}",
            )
        return request.make_response(ResponseCode.SUCCESS)
