from __future__ import annotations

import time

import pytest

from autotune.runtime.engine import EngineConfig
from autotune.search.finalists import near_ties, rerace
from tests.search.test_refine import WORKLOAD
from tests.support.pools import CostPool, virtual_clock  # noqa: F401 - the fixture, used below

pytestmark = pytest.mark.usefixtures("virtual_clock")  # costs on a clock only the pool advances


BASELINE, TIED_A, TIED_B, SLOW = (EngineConfig(b, 1, False, "fp32") for b in (32, 2, 4, 8))


def _rounds(*p95s: float) -> list[list[float]]:
    """Rounds of one query each, in seconds."""
    return [[p] for p in p95s]


def test_near_ties_are_the_contenders_within_the_noise_of_the_fastest_closest_first():
    passes = {0: _rounds(1.00, 1.02), 1: _rounds(1.09, 1.05), 2: _rounds(1.20, 1.25), 3: _rounds(0.98, 0.99)}
    assert near_ties(passes) == [3, 0, 1]  # 2 is over 10% behind
    assert near_ties({0: _rounds(1.0), 1: _rounds(2.0)}) == [0]
    assert near_ties({}) == []


def _cost(config: EngineConfig) -> float:
    return {BASELINE: 150.0, TIED_A: 60.0, TIED_B: 60.0, SLOW: 180.0}[config]


def test_a_near_tie_runs_the_extra_rounds_and_a_clear_loser_or_the_baseline_does_not():
    raced = rerace(CostPool(_cost), WORKLOAD, [BASELINE, TIED_A, TIED_B, SLOW], 2, tie_rounds=2)
    rounds = {f.config: len(f.round_p95_ms) for f in raced}
    assert rounds == {BASELINE: 2, TIED_A: 4, TIED_B: 4, SLOW: 2}
    assert raced[0].is_baseline and not any(f.is_baseline for f in raced[1:])


def test_a_clear_winner_ends_the_race_on_the_first_rounds():
    costs = {BASELINE: 150.0, TIED_A: 20.0, TIED_B: 60.0, SLOW: 180.0}
    raced = rerace(CostPool(costs.__getitem__), WORKLOAD, [BASELINE, TIED_A, TIED_B, SLOW], 2, tie_rounds=2)
    assert [len(f.round_p95_ms) for f in raced] == [2, 2, 2, 2]


def test_the_extra_rounds_stop_at_the_deadline():
    raced = rerace(CostPool(_cost), WORKLOAD, [BASELINE, TIED_A, TIED_B], 2, tie_rounds=2,
                   until=time.monotonic())
    assert [len(f.round_p95_ms) for f in raced] == [2, 2, 2]


def test_without_a_baseline_every_configuration_may_run_the_extra_rounds():
    raced = rerace(CostPool(_cost), WORKLOAD, [TIED_A, TIED_B, SLOW], 2, baseline_first=False, tie_rounds=1)
    assert [len(f.round_p95_ms) for f in raced] == [3, 3, 2]
