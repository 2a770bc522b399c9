from __future__ import annotations

import numpy as np
import pytest

from autotune.gates.parity import FP32_TOLERANCE, INT8_TOLERANCE, compare, rank, spearman, topk_overlap


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


# ---- issue 50, item 5: a planted reference is caught, and `--fresh` reads none --------------------------------


def _poison(monkeypatch, setup):  # type: ignore[no-untyped-def]
    """Rewrite the cached reference with each query's scores reversed, keeping its binding."""
    import io

    from autotune.fileio import read_bound, write_bound
    from autotune.paths import cache_dir

    pool, workload, reference = setup
    [path] = (cache_dir() / "references").glob(f"{pool.bundle.sha256[:16]}-{workload.sha256[:16]}-*.npz")
    head = path.read_bytes().partition(b"\n")[0]
    import json

    binding = json.loads(head)
    assert read_bound(path, binding)[0] is not None
    buf = io.BytesIO()
    np.savez(buf, **{f"q{i}": s[::-1].copy() for i, s in enumerate(reference)})
    write_bound(path, binding, buf.getvalue())


def test_a_planted_reference_is_rebuilt_and_said(setup, monkeypatch):
    from autotune.gates.parity import reference_scores

    pool, workload, reference = setup
    _poison(monkeypatch, setup)
    said: list[str] = []
    again = reference_scores(pool, workload, "test", note=said.append)
    assert all(np.allclose(a, b, atol=1e-5) for a, b in zip(again, reference, strict=True))
    assert said and "differ from the model's own" in said[0]


def test_fresh_reads_no_cached_reference(setup, monkeypatch):
    import autotune.gates.parity as parity
    from autotune.paths import read_caches

    pool, workload, reference = setup
    _poison(monkeypatch, setup)
    monkeypatch.setattr(parity, "SPOT_CHECKS", 0)  # a check this blind would trust the planted file...
    try:
        read_caches(False)  # ...but --fresh never reads it
        again = parity.reference_scores(pool, workload, "test")
    finally:
        read_caches(True)
    assert all(np.allclose(a, b, atol=1e-5) for a, b in zip(again, reference, strict=True))
