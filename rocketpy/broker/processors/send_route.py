"""Where a send is stored: retry topics past their budget, delay levels and delivery times.

Owns: ``handleRetryAndDLQ`` (a ``%RETRY%`` send redirected to ``%DLQ%<group>``), delay levels
(``DELAY=n`` -> ``SCHEDULE_TOPIC_XXXX`` queue ``n-1`` with ``REAL_TOPIC``/``REAL_QID``, as
``HookUtils``) and the timer hook in front of them (``HookUtils.handleScheduleMessage``), for
the send path, consumer send-backs and committed transactional messages alike. Must not:
store anything or answer a request (``send.py`` does).
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.processors.send_back import V3_4_9
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.timer_hook import TimerHook, TimerRefusal
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.record import is_prepared_or_rollback
from rocketpy.remoting.protocol.body.config_shapes import PERM_READ, PERM_WRITE, TopicConfig
from rocketpy.remoting.protocol.headers.broker import SendMessageRequestHeader


def int_prop(props: Mapping[str, str], key: str) -> int:
    """A property as an int; 0 when absent or not a number."""
    try:
        return int(props.get(key, "0"))
    except ValueError:
        return 0


class SendRoute:
    """The routing of sends, for one broker."""

    def __init__(self, rt: BrokerRuntime) -> None:
        """Args: ``rt`` the shared broker state."""
        self._rt = rt
        #: 5.x timer messages (``timer_hook.py``), set by the broker; None: stored as sent.
        self.timer_hook: TimerHook | None = None

    def apply_delay(
        self, topic: str, queue_id: int, sys_flag: int, props: dict[str, str]
    ) -> tuple[str, int]:
        """``HookUtils.transformDelayLevelMessage``: where a message is stored. One with
        ``DELAY=n>0`` (and not a half/rollback transaction record) goes to
        ``SCHEDULE_TOPIC_XXXX`` queue ``n-1``, its real topic and queue kept in ``props``."""
        if is_prepared_or_rollback(sys_flag):
            return topic, queue_id
        level = int_prop(props, MessageConst.DELAY)
        if level <= 0:
            return topic, queue_id
        level = min(level, self._rt.max_delay_level)
        props[MessageConst.DELAY] = str(level)
        props[MessageConst.REAL_TOPIC] = topic
        props[MessageConst.REAL_QID] = str(queue_id)
        return tv.RMQ_SYS_SCHEDULE_TOPIC, level - 1

    def schedule_route(
        self, topic: str, queue_id: int, sys_flag: int, props: dict[str, str]
    ) -> tuple[str, int] | TimerRefusal:
        """``HookUtils.handleScheduleMessage``: the timer hook (``timer_hook.py``), then delay
        levels (:meth:`apply_delay`); a send and a committed transactional message go here."""
        if self.timer_hook is not None:
            timed = self.timer_hook.apply(
                topic, queue_id, sys_flag, props, self._rt.clock.wall_ms()
            )
            if isinstance(timed, TimerRefusal):
                return timed
            topic, queue_id = timed
        return self.apply_delay(topic, queue_id, sys_flag, props)

    def retry_and_dlq(
        self,
        version: int,
        h: SendMessageRequestHeader,
        props: dict[str, str],
        queue_id: int,
        topic_config: TopicConfig,
    ) -> tuple[str, int, TopicConfig]:
        """``handleRetryAndDLQ``: where the message goes. A ``%RETRY%`` send past its reconsume
        budget, or while the group holds orderly locks, is redirected to ``%DLQ%<group>`` with
        ``DELAY=-1`` (set in ``props``)."""
        if not tv.is_retry_topic(h.topic):
            return h.topic, queue_id, topic_config
        rt = self._rt
        group = h.topic[len(tv.RETRY_GROUP_TOPIC_PREFIX) :]
        group_config = rt.groups.find(group)
        if group_config is None:
            raise RemoteError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        max_times = group_config.retry_max_times
        if version >= V3_4_9 and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        reconsume = h.reconsume_times or 0
        if reconsume > max_times or not rt.locks.is_lock_all_expired(group):
            props[MessageConst.DELAY] = "-1"
            dlq = tv.dlq_topic(group)
            dlq_config = rt.topics.create_in_send_back(
                dlq, tv.DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE
            )
            return dlq, rt.rng.randrange(tv.DLQ_NUMS_PER_GROUP), dlq_config
        return h.topic, queue_id, topic_config
