"""A fixed-bound histogram shared by the broker's and the proxy's metrics.

Owns: :class:`Histogram` (bucket counts, sum and max; observing is a ``bisect`` and three adds)
and :func:`prom_buckets` (its cumulative ``le`` buckets as Prometheus wants them). Must not: do
I/O or know metric names. Upstream's OpenTelemetry histograms play this part.
"""

from __future__ import annotations

from bisect import bisect_left


class Histogram:
    """Fixed-bound histogram: ``counts[i]`` counts values ``<= bounds[i]`` and ``> bounds[i-1]``;
    the last slot counts values above every bound. Also tracks the sum and the max."""

    __slots__ = ("bounds", "counts", "max", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        """Args: ``bounds`` strictly increasing upper bounds."""
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.max = 0.0

    def observe(self, value: float, count: int = 1) -> None:
        """Add ``count`` observations of ``value``."""
        self.counts[bisect_left(self.bounds, value)] += count
        self.sum += value * count
        if value > self.max:  # noqa: PLR1730 - not max(): observed per message
            self.max = value


def prom_buckets(hist: Histogram) -> list[tuple[str, float]]:
    """Cumulative ``(le, count)`` pairs ending with ``+Inf``."""
    out: list[tuple[str, float]] = []
    acc = 0
    for bound, count in zip(hist.bounds, hist.counts, strict=False):
        acc += count
        out.append((repr(float(bound)), float(acc)))
    out.append(("+Inf", float(acc + hist.counts[-1])))
    return out
