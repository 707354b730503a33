"""GET_TIMER_CHECK_POINT (60) and GET_TIMER_METRICS (61).

Owns: answering the timer store's checkpoint (the 56 bytes of ``TimerCheckpoint.encode``) and
its per-topic pending counts (``TimerMetrics.encode``: ``{"dataVersion": ..., "timingCount":
{topic: {"count": n, "timeStamp": ms}}}``). Mirrors ``AdminBrokerProcessor.getTimerCheckPoint``
and ``getTimerMetrics``. Must not: change the timer store.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketpy.broker.timer_store import TimerMessageStore
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import Processor, RequestContext
from rocketpy.store.timer.record import encode_checkpoint


class TimerProcessor:
    """The timer store's admin queries."""

    def __init__(self, timer: TimerMessageStore | None) -> None:
        """Args: ``timer`` the broker's timer store (None with ``timerWheelEnable=false``)."""
        self._timer = timer

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.GET_TIMER_CHECK_POINT: self.get_timer_check_point,
            RequestCode.GET_TIMER_METRICS: self.get_timer_metrics,
        }

    async def get_timer_check_point(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """The checkpoint last written (``TimerCheckpoint.encode``)."""
        if self._timer is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        body = encode_checkpoint(self._timer.last_checkpoint)
        return request.make_response(ResponseCode.SUCCESS, body=body)

    async def get_timer_metrics(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """Pending timer messages per real topic (``TimerMetrics.encode``)."""
        if self._timer is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, "The timer message store is null"
            )
        body = self._timer.metrics.encode().encode()
        return request.make_response(ResponseCode.SUCCESS, body=body)
