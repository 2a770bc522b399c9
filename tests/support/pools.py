"""A scoring pool whose configurations cost a known time on a virtual clock, for the search's timing logic.

The measuring code's clock is replaced by one that only the pool advances, so a test of which contender wins
sees exactly the costs it set, whatever else the host is doing (sleeps made these tests flaky under load).
"""

from __future__ import annotations

import numpy as np
import pytest

from autotune.runtime.engine import EngineConfig, ScoreResult

CLOCK = [0.0]  # virtual seconds: a configuration's cost is exactly what the timer sees, whatever the host's load


@pytest.fixture()
def virtual_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from autotune.measure import timing as measure

    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=lambda: CLOCK[0]))


class CostPool:
    """Each configuration costs a known (virtual) time; `bad` configurations score wrongly (fail parity)."""

    max_sessions = 2

    def __init__(self, cost_ms, bad=()) -> None:
        self.cost_ms, self.bad, self.built = cost_ms, set(bad), []

    def effective(self, config: EngineConfig) -> EngineConfig:
        return config

    def release(self) -> None:
        pass

    def keep_sessions(self, n: int) -> None:
        self.max_sessions = n

    def engine(self, config: EngineConfig):
        self.built.append(config)
        pool = self

        class Scorer:
            def score(self, query: str, documents: list[str]) -> ScoreResult:
                CLOCK[0] += pool.cost_ms(config) / 1000.0
                scores = np.array([0.9, 0.0]) if config in pool.bad else np.array([0.1, 0.2])
                return ScoreResult(scores, scores, 0.0, 0.0, 0.0, 2, 2, [1, 1])

        return Scorer()


