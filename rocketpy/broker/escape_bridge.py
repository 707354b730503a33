"""EscapeBridge: puts a message that this (slave) broker must not write on a live master of
another broker set.

Owns: choosing the target (the topic's route from the NameServer: a writable queue of another
broker set's master, round-robin; a topic no other set serves falls back to ``TBW102``'s route,
as a producer does for a new topic, queue 0, the remote broker creating the topic), the
SEND_MESSAGE it sends there (``WAIT=false``, the message's own properties, flag, sys flag, born
time and reconsume times) and mapping the answer to a :class:`PutResult`. Mirrors
``broker/failover/EscapeBridge`` (putMessage, putMessageToRemoteBroker; seed 003 "remote
escape"). Must not: write the local store (a slave's commit log never forks, seed 003), retry (the
callers do: the schedule service retries a due message until it is accepted, never skipping it).

Decided: rocketpy has no BrokerContainer, so there is no local escape (``peekMasterBroker`` is
always empty on a slave). As upstream, escaping needs ``enableSlaveActingMaster`` and
``enableRemoteEscape``; otherwise the result is SERVICE_NOT_AVAILABLE and nothing is sent.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Final

import structlog

from rocketpy.broker.acting_api import ActingMasterAPI
from rocketpy.broker.config import BrokerConfig
from rocketpy.client.admin import TopicRoute
from rocketpy.common.errors import CodecError, RemoteError, RemotingError
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import decode_properties, encode_properties
from rocketpy.remoting.protocol.body.config_shapes import PERM_WRITE
from rocketpy.remoting.protocol.headers.broker import SendMessageRequestHeader
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus, PutResult

log = structlog.get_logger(__name__)

MASTER_ID: Final = 0
#: ``TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`` and the producer's default queue count.
DEFAULT_TOPIC: Final = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4


def escape_targets(route: TopicRoute, exclude: str) -> list[tuple[str, str, int]]:
    """``(brokerName, master address, writable queue count)`` of every other writable set."""
    masters = {
        b.broker_name: b.broker_addrs[MASTER_ID]
        for b in route.brokers
        if MASTER_ID in b.broker_addrs and b.broker_name != exclude
    }
    return [
        (q.broker_name, masters[q.broker_name], q.write_queue_nums)
        for q in sorted(route.queues, key=lambda q: q.broker_name)
        if q.perm & PERM_WRITE and q.broker_name in masters and q.write_queue_nums > 0
    ]


class EscapeBridge:
    """Remote escape of messages a slave acting as master produces."""

    def __init__(
        self,
        api: ActingMasterAPI,
        config: Callable[[], BrokerConfig],
    ) -> None:
        """Args: ``api`` sends the requests; ``config`` the broker's current settings (own
        broker name, NameServers, the two switches)."""
        self._api = api
        self._config = config
        self._round_robin = itertools.count()
        #: Messages escaped so far (statistics and tests).
        self.escaped = 0

    def _inner_group(self, cfg: BrokerConfig) -> str:
        return f"InnerProducerGroup_{cfg.broker_name}_{cfg.broker_id}"

    async def put_message(self, msg: MessageToStore) -> PutResult:
        """``putMessage``: send ``msg`` to another broker set's master.

        Returns:
            PUT_OK when a master stored it; SERVICE_NOT_AVAILABLE when escaping is switched off;
            UNKNOWN_ERROR (upstream PUT_TO_REMOTE_BROKER_FAIL) when no target took it.
        """
        cfg = self._config()
        if not (cfg.enable_acting_master and cfg.enable_remote_escape):
            log.warning(
                "Put message failed, escaping is disabled",
                enable_slave_acting_master=cfg.enable_acting_master,
                enable_remote_escape=cfg.enable_remote_escape,
            )
            return PutResult(status=PutMessageStatus.SERVICE_NOT_AVAILABLE)
        try:
            return await self._put_remote(cfg, msg)
        except (RemotingError, RemoteError, CodecError) as e:
            log.warning("putMessageToRemoteBroker exception", topic=msg.topic, error=repr(e))
            return PutResult(status=PutMessageStatus.UNKNOWN_ERROR)

    async def _put_remote(self, cfg: BrokerConfig, msg: MessageToStore) -> PutResult:
        namesrvs = cfg.namesrv_addr_list
        route = await self._api.topic_route(namesrvs, msg.topic)
        targets = escape_targets(route, cfg.broker_name) if route is not None else []
        from_default = not targets
        if from_default:
            default = await self._api.topic_route(namesrvs, DEFAULT_TOPIC)
            targets = escape_targets(default, cfg.broker_name) if default is not None else []
        if not targets:
            log.warning(
                "putMessageToRemoteBroker: no route info of topic when escaping message",
                topic=msg.topic,
            )
            return PutResult(status=PutMessageStatus.UNKNOWN_ERROR)
        name, addr, nums = targets[next(self._round_robin) % len(targets)]
        queue_id = 0 if from_default else next(self._round_robin) % nums
        header = self._header(cfg, msg, name, queue_id)
        sent = await self._api.send_message(addr, header, msg.body)
        self.escaped += 1
        log.info(
            "message escaped to another master",
            topic=msg.topic,
            broker=name,
            queue_id=sent.queue_id,
            queue_offset=sent.queue_offset,
        )
        return PutResult(
            status=PutMessageStatus.PUT_OK, msg_id=sent.msg_id, queue_offset=sent.queue_offset
        )

    def _header(
        self, cfg: BrokerConfig, msg: MessageToStore, broker: str, queue_id: int
    ) -> SendMessageRequestHeader:
        props = decode_properties(msg.properties)
        props[MessageConst.WAIT] = "false"
        group = props.get(MessageConst.PGROUP) or self._inner_group(cfg)
        return SendMessageRequestHeader(
            producer_group=group,
            topic=msg.topic,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id=queue_id,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            flag=msg.flag,
            properties=encode_properties(props),
            reconsume_times=msg.reconsume_times,
            unit_mode=False,
            batch=False,
            bname=broker,
        )
