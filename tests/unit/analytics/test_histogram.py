"""analytics.histogram: merging dump histograms and estimating quantiles (no Spark)."""

from __future__ import annotations

import math

import pytest

from analytics.histogram import merge_counts, quantile

BOUNDS = (1.0, 2.0, 5.0, 10.0)


def test_histogram_merge_counts_elementwise() -> None:
    """1. Merge three 5-slot histograms. Expected: the element-wise sum; [] for no input."""
    assert merge_counts([[1, 0, 2, 0, 0], [0, 3, 0, 1, 0], [4, 0, 0, 0, 5]]) == [5, 3, 2, 1, 5]
    assert merge_counts([]) == []


def test_histogram_merge_rejects_different_layouts() -> None:
    """1. Merge a 5-slot and a 4-slot histogram. Expected: ValueError."""
    with pytest.raises(ValueError, match="length"):
        merge_counts([[1, 0, 0, 0, 0], [1, 0, 0, 0]])


def test_histogram_quantile_interpolates_inside_bucket() -> None:
    """1. 100 values: 50 in (0,1], 40 in (1,2], 10 in (2,5]; max 4.
    Expected: p50 = 1.0 (rank 50 ends the first bucket); p90 = 2.0; p95 = 2 + 3*5/10 = 3.5;
    p99 = 2 + 3*9/10 = 4.7 capped to the max 4.0."""
    counts = [50, 40, 10, 0, 0]
    assert quantile(0.5, BOUNDS, counts, 4.0) == 1.0
    assert quantile(0.9, BOUNDS, counts, 4.0) == 2.0
    assert quantile(0.95, BOUNDS, counts, 4.0) == pytest.approx(3.5)
    assert quantile(0.99, BOUNDS, counts, 4.0) == 4.0


def test_histogram_quantile_overflow_bucket_uses_max() -> None:
    """1. 10 values above the last bound, max 30. Expected: p50 = 10 + 20*5/10 = 20; empty
    histogram gives nan."""
    assert quantile(0.5, BOUNDS, [0, 0, 0, 0, 10], 30.0) == pytest.approx(20.0)
    assert math.isnan(quantile(0.5, BOUNDS, [0, 0, 0, 0, 0], 0.0))


def test_histogram_merged_quantile_equals_quantile_of_union() -> None:
    """1. Two brokers' histograms of known values. 2. Merge, take p99.
    Expected: equal to p99 of the histogram built from all values together."""
    a = [0.5, 0.7, 1.5, 3.0, 12.0]
    b = [0.2, 1.1, 1.2, 6.0]

    def hist(values: list[float]) -> list[int]:
        counts = [0] * (len(BOUNDS) + 1)
        for v in values:
            counts[next((i for i, bd in enumerate(BOUNDS) if v <= bd), len(BOUNDS))] += 1
        return counts

    merged = merge_counts([hist(a), hist(b)])
    assert merged == hist(a + b)
    assert quantile(0.99, BOUNDS, merged, 12.0) == quantile(0.99, BOUNDS, hist(a + b), 12.0)
