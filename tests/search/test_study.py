from __future__ import annotations

import optuna
import pytest

from autotune.errors import OptionsError
from autotune.runtime.engine import EngineConfig
from autotune.search.finalists import Finalist, choose
from autotune.search.space import SearchSettings, SearchSpace
from autotune.search.stats import Latency
from autotune.search.study import SlowerThanBestPruner, best_feasible_value


def test_space_caps_batch_sizes_at_the_largest_query():
    space = SearchSpace.for_host(usable_cores=4, max_candidates=20)
    assert space.batch_sizes == (1, 2, 4, 8, 16, 20)
    assert space.threads == (0, 1, 2, 3, 4)
    assert space.baseline() == EngineConfig(20, 0, False, "fp32")
    assert SearchSpace.for_host(usable_cores=2, max_candidates=300).baseline().batch_size == 32


@pytest.mark.parametrize("kwargs", [{"batch_sizes": [0]}, {"precisions": ["fp16"]}, {"max_threads": 0}])
def test_space_rejects_impossible_options(kwargs):
    with pytest.raises(OptionsError):
        SearchSpace.for_host(usable_cores=2, max_candidates=10, **kwargs)


@pytest.mark.parametrize("kwargs", [{"trials": 0}, {"repeats": 0}, {"timeout_s": -1}, {"prune_ratio": 1.0}])
def test_settings_validation(kwargs):
    with pytest.raises(OptionsError):
        SearchSettings(**kwargs)


def test_pruner_stops_clearly_slower_trials_and_ignores_infeasible_best():
    study = optuna.create_study(pruner=SlowerThanBestPruner(1.5))

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", 0, 10)
        trial.set_constraint("parity", 1.0 if x == 1.0 else -1.0)
        trial.report(x, 0)
        if trial.should_prune():
            raise optuna.TrialPruned()
        return x

    for x in (1.0, 4.0, 5.0, 7.0):
        study.enqueue_trial({"x": x})
    study.optimize(objective, n_trials=4)
    states = [t.state.name for t in study.trials]
    # 1.0 is infeasible, so 4.0 is the best: 5.0 < 6.0 runs on, 7.0 > 6.0 is pruned.
    assert states == ["COMPLETE", "COMPLETE", "COMPLETE", "PRUNED"]
    assert best_feasible_value(study.trials) == 4.0


def _finalist(p95s: list[float], baseline: bool = False) -> Finalist:
    config = EngineConfig(32 if baseline else 4, 0, False, "fp32")
    return Finalist(config, Latency(p95s[0], sum(p95s) / len(p95s), p95s[-1]), p95s, None, baseline)


def test_choose_lowest_p95_and_warn_when_noisy():
    quiet_base, quiet_fast = _finalist([300, 300, 301], True), _finalist([150, 151, 150])
    winner, warnings = choose([quiet_base, quiet_fast])
    assert winner is quiet_fast and warnings == []
    noisy = _finalist([100, 200, 140])
    _, warnings = choose([quiet_base, quiet_fast, noisy])
    assert any("vary" in w for w in warnings)
