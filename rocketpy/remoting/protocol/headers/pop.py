"""Typed custom headers of the POP request family (codes 200050-200151, proxy.md section 3).

Owns: one frozen dataclass per upstream ``CommandCustomHeader`` of POP_MESSAGE, ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME, PEEK_MESSAGE, NOTIFICATION and POLLING_INFO, extFields keys as
upstream's Java field names. Mirrors ``remoting/protocol/header/PopMessageRequestHeader`` and its
siblings of apache/rocketmq 5.3.x. These codes overflow the ROCKETMQ header's int16 code, so they
travel with JSON headers. Must not: carry behaviour. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketpy.remoting.protocol.headers.base import wire


@dataclass(frozen=True, slots=True, kw_only=True)
class PopMessageRequestHeader:
    """``PopMessageRequestHeader`` (POP_MESSAGE 200050). ``queueId`` -1 pops every read
    queue; ``initMode`` 0 MIN, 1 MAX."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    max_msg_nums: int = wire("maxMsgNums")
    invisible_time: int = wire("invisibleTime")
    poll_time: int = wire("pollTime")
    born_time: int = wire("bornTime")
    init_mode: int = wire("initMode")
    exp_type: str | None = wire("expType", default=None)
    exp: str | None = wire("exp", default=None)
    order: bool | None = wire("order", default=None)
    attempt_id: str | None = wire("attemptId", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class PopMessageResponseHeader:
    """``PopMessageResponseHeader``."""

    pop_time: int = wire("popTime")
    invisible_time: int = wire("invisibleTime")
    revive_qid: int = wire("reviveQid")
    rest_num: int = wire("restNum")
    start_offset_info: str | None = wire("startOffsetInfo", default=None)
    msg_offset_info: str | None = wire("msgOffsetInfo", default=None)
    order_count_info: str | None = wire("orderCountInfo", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class AckMessageRequestHeader:
    """``AckMessageRequestHeader`` (ACK_MESSAGE 200051): ``topic`` is the real topic (the pop
    retry topic for a handle of type 1/2), ``offset`` the message's queue offset."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    extra_info: str = wire("extraInfo")
    offset: int = wire("offset")
    bname: str | None = wire("bname", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeInvisibleTimeRequestHeader:
    """``ChangeInvisibleTimeRequestHeader`` (CHANGE_MESSAGE_INVISIBLETIME 200053)."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    extra_info: str = wire("extraInfo")
    offset: int = wire("offset")
    invisible_time: int = wire("invisibleTime")
    bname: str | None = wire("bname", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeInvisibleTimeResponseHeader:
    """``ChangeInvisibleTimeResponseHeader``: the new handle's pop time and revive queue."""

    pop_time: int = wire("popTime")
    invisible_time: int = wire("invisibleTime")
    revive_qid: int = wire("reviveQid")


@dataclass(frozen=True, slots=True, kw_only=True)
class PeekMessageRequestHeader:
    """``PeekMessageRequestHeader`` (PEEK_MESSAGE 200052)."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    max_msg_nums: int = wire("maxMsgNums")


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationRequestHeader:
    """``NotificationRequestHeader`` (NOTIFICATION 200054)."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")
    poll_time: int = wire("pollTime")
    born_time: int = wire("bornTime")
    order: bool | None = wire("order", default=None)
    attempt_id: str | None = wire("attemptId", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationResponseHeader:
    """``NotificationResponseHeader``."""

    has_msg: bool = wire("hasMsg")


@dataclass(frozen=True, slots=True, kw_only=True)
class PollingInfoRequestHeader:
    """``PollingInfoRequestHeader`` (POLLING_INFO 200055)."""

    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId")


@dataclass(frozen=True, slots=True, kw_only=True)
class PollingInfoResponseHeader:
    """``PollingInfoResponseHeader``: how many POPs are parked for the key."""

    polling_num: int = wire("pollingNum")
