"""Fixed-bound latency histograms as the dumps carry them: merging and quantiles.

Pure Python (no pyspark), the reference the Spark expressions in ``throughput.py`` implement and
the tests compare against. ``counts[i]`` counts values in ``(bounds[i-1], bounds[i]]``; the last
slot counts values above ``bounds[-1]``. A quantile is estimated as Prometheus'
``histogram_quantile`` does: find the bucket holding rank ``q * total`` and interpolate linearly
inside it; the lower edge of the first bucket is 0; the overflow bucket's upper edge is the
observed maximum; the result never exceeds the observed maximum.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def merge_counts(histograms: Iterable[Sequence[int]]) -> list[int]:
    """Element-wise sum of equally long count arrays (an empty input gives ``[]``).

    Raises:
        ValueError: the arrays differ in length (different bucket layouts).
    """
    merged: list[int] = []
    for counts in histograms:
        if not merged:
            merged = list(counts)
            continue
        if len(counts) != len(merged):
            raise ValueError(f"histogram length {len(counts)} != {len(merged)}")
        for i, c in enumerate(counts):
            merged[i] += c
    return merged


def quantile(q: float, bounds: Sequence[float], counts: Sequence[int], max_value: float) -> float:
    """The ``q`` quantile (0 < q <= 1) of a histogram; ``nan`` when it is empty.

    Args:
        q: the quantile, e.g. 0.99.
        bounds: the bucket upper bounds.
        counts: ``len(bounds) + 1`` counts.
        max_value: the largest observed value (caps the estimate, closes the overflow bucket).
    """
    total = sum(counts)
    if total == 0:
        return float("nan")
    rank = q * total
    cumulative = 0
    for i, count in enumerate(counts):
        if count and cumulative + count >= rank:
            lower = bounds[i - 1] if i > 0 else 0.0
            upper = bounds[i] if i < len(bounds) else max(max_value, lower)
            estimate = lower + (upper - lower) * (rank - cumulative) / count
            return min(estimate, max_value) if max_value > 0 else estimate
        cumulative += count
    return max_value
