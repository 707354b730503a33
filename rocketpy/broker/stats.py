"""BrokerStats: message put/get counters and TPS for GET_BROKER_RUNTIME_INFO and
GET_CONSUME_STATS.

Owns: totals since boot, the totals seen at the last midnight ("today morning") and the day
before, and one-second samples for TPS over 10 s / 1 min / 10 min. Mirrors the parts of
``store/stats/BrokerStatsManager`` and ``BrokerStats`` that ``mqadmin clusterList`` and
``consumerProgress`` display. Time from a :class:`~rocketpy.common.clock.Clock`; no I/O.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from dataclasses import dataclass

from rocketpy.common.clock import SYSTEM_CLOCK, Clock

_WINDOWS_S = (10, 60, 600)


@dataclass(slots=True)
class _Sample:
    mono_ms: int
    puts: int
    gets: int


class BrokerStats:
    """Counters of stored and delivered messages."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        """Args: ``clock`` wall time for day boundaries, monotonic time for rates."""
        self._clock = clock
        self.boot_timestamp = clock.wall_ms()
        self.put_total = 0
        self.get_total = 0
        self._group_gets: dict[tuple[str, str], deque[tuple[int, int]]] = {}
        self._samples: deque[_Sample] = deque(maxlen=max(_WINDOWS_S) + 1)
        self._day = self._today()
        self.put_today_morning = 0
        self.get_today_morning = 0
        self.put_yesterday_morning = 0
        self.get_yesterday_morning = 0
        #: Per topic / group windows for VIEW_BROKER_STATS_DATA (sampled by the broker service).
        self.items = StatsItems(clock.monotonic_ms())

    def _today(self) -> dt.date:
        return dt.datetime.fromtimestamp(self._clock.wall_ms() / 1000).astimezone().date()

    def inc_put(self, count: int = 1) -> None:
        """Messages stored."""
        self.put_total += count

    def inc_get(self, group: str, topic: str, count: int) -> None:
        """Messages delivered to ``group`` from ``topic``."""
        self.get_total += count
        window = self._group_gets.setdefault((group, topic), deque())
        now = self._clock.monotonic_ms()
        window.append((now, count))
        while window and now - window[0][0] > 60_000:
            window.popleft()

    def group_get_tps(self, group: str, topic: str) -> int:
        """Messages per second ``group`` pulled from ``topic`` over the last minute."""
        window = self._group_gets.get((group, topic))
        if not window:
            return 0
        now = self._clock.monotonic_ms()
        return sum(c for t, c in window if now - t <= 60_000) // 60

    def sample(self) -> None:
        """Record one sample (called every second) and roll the day counters at midnight."""
        today = self._today()
        if today != self._day:
            self._day = today
            self.put_yesterday_morning, self.get_yesterday_morning = (
                self.put_today_morning,
                self.get_today_morning,
            )
            self.put_today_morning, self.get_today_morning = self.put_total, self.get_total
        self._samples.append(_Sample(self._clock.monotonic_ms(), self.put_total, self.get_total))

    def _tps(self, attr: str) -> str:
        if not self._samples:
            return " ".join("0.00" for _ in _WINDOWS_S)
        last = self._samples[-1]
        out: list[str] = []
        for window in _WINDOWS_S:
            first = next(
                (s for s in self._samples if last.mono_ms - s.mono_ms <= window * 1000), last
            )
            span_s = (last.mono_ms - first.mono_ms) / 1000
            delta = getattr(last, attr) - getattr(first, attr)
            out.append(f"{delta / span_s:.2f}" if span_s > 0 else "0.00")
        return " ".join(out)

    def runtime_info(self) -> dict[str, str]:
        """The counters as GET_BROKER_RUNTIME_INFO's ``KVTable`` entries."""
        up_s = (self._clock.wall_ms() - self.boot_timestamp) // 1000
        days, rest = divmod(up_s, 86_400)
        hours, rest = divmod(rest, 3_600)
        minutes, seconds = divmod(rest, 60)
        return {
            "bootTimestamp": str(self.boot_timestamp),
            "runtime": f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]",
            "msgPutTotalTodayNow": str(self.put_total),
            "msgGetTotalTodayNow": str(self.get_total),
            "msgPutTotalTodayMorning": str(self.put_today_morning),
            "msgGetTotalTodayMorning": str(self.get_today_morning),
            "msgPutTotalYesterdayMorning": str(self.put_yesterday_morning),
            "msgGetTotalYesterdayMorning": str(self.get_yesterday_morning),
            "putTps": self._tps("puts"),
            "getTransferredTps": self._tps("gets"),
        }


#: ``BrokerStatsManager`` stats names VIEW_BROKER_STATS_DATA answers (``statsAll`` asks these).
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
#: (sample spacing s, samples kept) of the minute, hour and day views, as upstream's StatsItem
#: (its minute view samples every 10 s; ours every second, which only sharpens the same sum).
_VIEWS = (("statsMinute", 1, 61), ("statsHour", 60, 61), ("statsDay", 3600, 25))


class StatsItems:
    """Windowed views of cumulative counters, keyed by (stats name, key).

    :meth:`sample` is fed the broker's :class:`~rocketpy.broker.metrics.BrokerMetrics`
    totals (the counters the metrics dumps and Prometheus read), so ``statsAll`` and the dumps
    can never disagree. A key first seen gets a zero sample at the previous sampling time: its
    messages arrived since then. Mirrors ``StatsItem.getStatsDataIn{Minute,Hour,Day}``: a view's
    ``sum`` is the newest sample minus the oldest kept, ``tps`` that over the time between them.
    """

    def __init__(self, start_ms: int) -> None:
        """No items; counting started at monotonic ``start_ms`` (the first sample's baseline)."""
        self._items: dict[tuple[str, str], list[deque[tuple[int, int]]]] = {}
        self._last_ms = start_ms

    def sample(self, now_ms: int, values: dict[tuple[str, str], int]) -> None:
        """Record the counters at monotonic ``now_ms``."""
        for key, value in values.items():
            views = self._items.get(key)
            if views is None:
                views = [deque(maxlen=keep) for _, _, keep in _VIEWS]
                for view in views:
                    view.append((self._last_ms, 0))
                self._items[key] = views
            for view, (_, spacing_s, _) in zip(views, _VIEWS, strict=True):
                if len(view) < 2 or now_ms - view[-2][0] >= spacing_s * 1000:
                    view.append((now_ms, value))
                else:
                    view[-1] = (now_ms, value)  # the newest sample moves until spacing is reached
        self._last_ms = now_ms

    def stats_data(self, name: str, key: str) -> dict[str, dict[str, float]] | None:
        """``BrokerStatsData`` of one item (None if never seen): sum and tps per view."""
        views = self._items.get((name, key))
        if views is None:
            return None
        out: dict[str, dict[str, float]] = {}
        for view, (label, _, _) in zip(views, _VIEWS, strict=True):
            (t0, v0), (t1, v1) = view[0], view[-1]
            total = v1 - v0
            out[label] = {"sum": total, "tps": total * 1000 / (t1 - t0) if t1 > t0 else 0.0}
        return out
