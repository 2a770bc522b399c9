from __future__ import annotations

import numpy as np
import pytest

from autotune.search.parity import FP32_TOLERANCE, INT8_TOLERANCE, compare, rank, spearman, topk_overlap


def test_rank_averages_ties():
    assert rank(np.array([3.0, 1.0, 3.0])).tolist() == [1.5, 0.0, 1.5]


def test_spearman_and_topk():
    a = np.arange(20, dtype=float)
    assert spearman(a, a * 2) == pytest.approx(1.0)
    assert spearman(a, -a) == pytest.approx(-1.0)
    b = a.copy()
    b[[19, 0]] = b[[0, 19]]
    assert topk_overlap(a, b) == pytest.approx(0.9)
    assert topk_overlap(a[:3], a[:3]) == 1.0


def test_identical_scores_pass_and_drift_fails():
    ref = [np.linspace(0, 1, 30), np.linspace(1, 0, 12)]
    assert compare(ref, [r.copy() for r in ref], FP32_TOLERANCE).passed
    drifted = [ref[0], ref[1] + 2e-4]
    report = compare(ref, drifted, FP32_TOLERANCE)
    assert not report.passed and report.worst_query == 1 and "max |Δscore|" in report.reason()
    assert report.violation > 0


def test_reordering_fails_even_when_scores_are_close():
    ref = [np.linspace(0.5, 0.50001, 30)]
    cand = [ref[0][::-1].copy()]
    report = compare(ref, cand, INT8_TOLERANCE)
    assert report.max_abs < INT8_TOLERANCE.max_abs
    assert not report.passed and "Spearman" in report.reason()
