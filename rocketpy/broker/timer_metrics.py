"""TimerMetrics: pending timer messages per real topic, kept in ``config/timermetrics``.

Owns: the per-topic counts the timer store moves (+1 when a message is filed in the wheel, -1
when it is delivered or cancelled), their DataVersion, the fastjson text of
``TimerMetricsSerializeWrapper`` (``{"dataVersion": {...}, "timingCount": {topic: {"count": n,
"timeStamp": ms}}}``, the GET_TIMER_METRICS body and the file) and reading/writing the file
(atomically, with ``.bak``). Mirrors ``store/timer/TimerMetrics``. Must not: block the loop
(``load``/``write`` run on the timer store's executor) or be read off the loop while the loop
moves the counts (``changes`` takes the text on the loop).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rocketpy.common import fastjson
from rocketpy.common.atomic_file import read_with_backup, write_atomic
from rocketpy.common.errors import CodecError
from rocketpy.remoting.protocol.body.config_shapes import DataVersion


class TimerMetrics:
    """Per-topic pending counts."""

    def __init__(self, path: Path, now_ms: int) -> None:
        """Args: ``path`` ``<storePathRootDir>/config/timermetrics``; ``now_ms`` wall time."""
        self.path = path
        self.counts: dict[str, tuple[int, int]] = {}
        self.data_version = DataVersion(timestamp=now_ms)
        self._persisted = self.data_version

    def add(self, topic: str, delta: int, now_ms: int) -> None:
        """``addAndGet``: move ``topic``'s count."""
        count, _ = self.counts.get(topic, (0, 0))
        self.counts[topic] = (count + delta, now_ms)
        self.data_version = self.data_version.next_version(now_ms)

    def count(self, topic: str) -> int:
        """``getTimingCount``."""
        return self.counts.get(topic, (0, 0))[0]

    def encode(self) -> str:
        """The ``TimerMetricsSerializeWrapper`` JSON."""
        dv = self.data_version
        return fastjson.dumps(
            {
                "dataVersion": {
                    "counter": dv.counter,
                    "stateVersion": dv.state_version,
                    "timestamp": dv.timestamp,
                },
                "timingCount": {
                    topic: {"count": count, "timeStamp": ts}
                    for topic, (count, ts) in sorted(self.counts.items())
                },
            }
        )

    def load(self) -> None:
        """Read the file (or its ``.bak``). Blocks."""
        loaded = read_with_backup(self.path, _parse)
        if loaded is None:
            return
        body: dict[str, Any] = loaded.value
        for topic, metric in (body.get("timingCount") or {}).items():
            self.counts[str(topic)] = (int(metric.get("count", 0)), int(metric.get("timeStamp", 0)))
        dv = body.get("dataVersion") or {}
        self.data_version = DataVersion(
            timestamp=int(dv.get("timestamp", 0)),
            counter=int(dv.get("counter", 0)),
            state_version=int(dv.get("stateVersion", 0)),
        )
        self._persisted = self.data_version

    def changes(self) -> bytes | None:
        """The file's new content if anything changed since the last :meth:`changes` (taken on
        the loop, which alone moves the counts; :meth:`write` it off the loop)."""
        current = self.data_version
        if current == self._persisted:
            return None
        self._persisted = current
        return self.encode().encode()

    def write(self, data: bytes) -> None:
        """Replace the file with ``data`` from :meth:`changes`. Blocks."""
        write_atomic(self.path, data)


def _parse(data: bytes) -> dict[str, Any] | None:
    value = fastjson.loads(data)
    if not isinstance(value, dict):
        raise CodecError("timermetrics is not a JSON object")
    return value
