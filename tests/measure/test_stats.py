from __future__ import annotations

import pytest

from autotune.measure.stats import Latency, noise_warnings, per_query_medians, percentile, relative_spread


def test_stats_helpers():
    assert per_query_medians([[1, 5], [3, 1], [2, 9]]) == [2.0, 5.0]
    assert relative_spread([1.0]) == 0.0
    assert noise_warnings({"a": 0.01}, best_gap=0.005) != []
    assert noise_warnings({"a": 0.01}, best_gap=0.5) == []


def test_latency_percentiles_in_ms():
    lat = Latency.from_seconds([0.1] * 99 + [1.0])
    assert lat.p50_ms == pytest.approx(100.0) and lat.p99_ms > lat.p95_ms >= lat.p50_ms
    assert percentile([1, 2, 3], 50) == 2
