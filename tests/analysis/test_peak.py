"""The host's attainable FLOP/s, measured through onnxruntime: the best of its runs, counted as 2·n³."""

from __future__ import annotations

import math

from autotune.analysis import peak
from autotune.analysis.peak import measured_peak


def test_the_figure_is_two_n_cubed_over_the_fastest_run(monkeypatch):
    ticks = iter([0.0, 0.5, 10.0, 10.25, 20.0, 20.4])  # runs of 0.5, 0.25 and 0.4 s
    monkeypatch.setattr(peak.time, "perf_counter", lambda: next(ticks))
    assert measured_peak.__wrapped__(1, size=64, runs=3) == 2.0 * 64**3 / 0.25


def test_a_real_measurement_is_finite_and_cached():
    measured_peak.cache_clear()
    first = measured_peak(1, size=128, runs=2)
    assert math.isfinite(first) and first > 0
    assert measured_peak(1, size=128, runs=2) == first and measured_peak.cache_info().hits == 1
