from __future__ import annotations

import mmap
import time

import pytest

from autotune.measure import memory
from autotune.measure.memory import ModelMemory, PeakRss, cgroup_memory_limit, default_budget_mb
from autotune.search.objective import batch_shapes


def _spike(mb: int, hold_s: float = 0.0, until=None) -> None:  # type: ignore[no-untyped-def]
    """Fresh anonymous pages, touched so they are resident. A `bytearray` may reuse heap pages an earlier test freed
    but the allocator kept resident; then RSS never grows and the instrument looks blind (it failed so in CI)."""
    with mmap.mmap(-1, mb * 2**20) as block:
        for page in range(0, len(block), mmap.PAGESIZE):
            block[page] = 1
        time.sleep(hold_s)
        deadline = time.monotonic() + 60
        while until is not None and not until() and time.monotonic() < deadline:
            time.sleep(0.001)


def test_peak_sees_a_freed_spike():
    with PeakRss() as peak:
        _spike(200)
    assert peak.exact and peak.growth_mb > 150


def test_without_clear_refs_a_sampler_stands_in(monkeypatch, tmp_path):
    monkeypatch.setattr(memory, "_CLEAR_REFS", tmp_path / "missing" / "clear_refs")
    with PeakRss(interval_s=0.001) as peak:
        seen = peak.samples
        _spike(200, until=lambda: peak.samples >= seen + 2)  # held until the sampler has looked, however busy
    assert not peak.exact and peak.growth_mb > 150


def test_batch_memory_by_hand():
    m = ModelMemory(weights_mb=10.0, layers=2, heads=4, hidden=8, intermediate=16)
    rows, n = 3, 5
    expected = 4 * (2 * rows * 4 * n * n + rows * n * (4 * 8 + 2 * 16)) / 2**20
    assert m.batch_mb(rows, n) == pytest.approx(expected)
    assert m.session_mb(rows, n) == pytest.approx(20.0 + memory.RUNTIME_MB + expected)
    assert m.batch_mb(2 * rows, 2 * n) == pytest.approx(8 * (2 * rows * 4 * n * n) * 4 / 2**20
                                                      + 4 * rows * n * 64 * 4 / 2**20)


def test_model_memory_needs_the_config_fields():
    assert ModelMemory.from_config({"num_hidden_layers": 2}, 100) is None
    full = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 8, "intermediate_size": 16}
    assert ModelMemory.from_config(full, 2**20).weights_mb == 1.0


def test_batch_shapes_follow_the_engine_cut():
    assert batch_shapes([5, 1, 9, 3, 7], 2, False) == [(2, 5), (2, 9), (1, 7)]
    assert batch_shapes([5, 1, 9, 3, 7], 2, True) == [(2, 9), (2, 5), (1, 1)]


def test_budget_and_cgroup_limit():
    assert 0 < default_budget_mb() <= 2048 and default_budget_mb(cap_mb=1.0) == 1.0
    assert cgroup_memory_limit(lambda p: "max") is None
    assert cgroup_memory_limit(lambda p: "1073741824" if p.endswith("memory.max") else None) == 2**30
    assert cgroup_memory_limit(lambda p: None) is None


def test_the_process_peak_survives_the_per_trial_resets():
    from autotune.measure.memory import process_peak_mb, rss_mb

    before = rss_mb()
    _spike(300)
    with PeakRss():  # resets the kernel's mark, as every trial does
        pass
    assert process_peak_mb() > before + 250


def test_a_large_models_measured_session_sets_how_many_copies_of_its_weights_count():
    """Issue 52: a 2.2 GB graph's session held 0.9 of its weights; counting 2 refused every configuration."""
    large = ModelMemory(weights_mb=2135.0, layers=24, heads=16, hidden=1024, intermediate=4096)
    measured = 0.9 * 2135.0 + memory.RUNTIME_MB + large.batch_mb(1, 64)
    assert large.calibrated(measured, 64).weights_factor == pytest.approx(1.0)  # never fewer than one copy
    assert large.calibrated(1.5 * 2135.0 + large.batch_mb(1, 64) + memory.RUNTIME_MB, 64).weights_factor \
        == pytest.approx(1.5)
    assert large.calibrated(5 * 2135.0, 64).weights_factor == 2.0  # never more than the default two
    small = ModelMemory(weights_mb=90.0, layers=6, heads=12, hidden=384, intermediate=1536)
    assert small.calibrated(90.0, 64).weights_factor == 2.0  # a small model's session is not mostly weights
    assert large.calibrated(measured, 64).session_mb(1, 64) < large.session_mb(1, 64) - 2000
