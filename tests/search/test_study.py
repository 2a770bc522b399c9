from __future__ import annotations

import optuna
import pytest

from autotune.errors import OptionsError
from autotune.measure.stats import Latency
from autotune.runtime.engine import EngineConfig
from autotune.runtime.space import SearchSpace
from autotune.search.finalists import Finalist, choose
from autotune.search.objective import rung_sizes
from autotune.search.space import SearchSettings
from autotune.search.study import best_feasible_value, halving_pruner


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


@pytest.mark.parametrize("kwargs", [{"trials": 0}, {"repeats": 0}, {"timeout_s": -1}, {"refine_rounds": -1},
                                    {"max_memory_mb": 0.0}])
def test_settings_validation(kwargs):
    with pytest.raises(OptionsError):
        SearchSettings(**kwargs)


@pytest.mark.parametrize(("n", "halving", "expected"), [
    (12, True, [3, 6, 12]), (10, True, [3, 6, 10]), (4, True, [1, 2, 4]), (3, True, [3]), (12, False, [12])])
def test_rungs_start_at_a_quarter_and_double_to_the_whole_workload(n, halving, expected):
    assert rung_sizes(n, halving) == expected


def test_successive_halving_keeps_the_better_half_at_each_rung():
    """Trials report their p95 at 3 and 6 queries (of 12), as the objective does."""
    study = optuna.create_study(pruner=halving_pruner(rung_sizes(12, True)))

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", 0, 10)
        trial.set_constraint("parity", 1.0 if x == 1.0 else -1.0)
        for step in (3, 6):
            trial.report(x, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return x

    for x in (4.0, 1.0, 5.0, 3.0, 9.0, 2.0, 8.0):
        study.enqueue_trial({"x": x})
    study.optimize(objective, n_trials=7)
    states = {t.params["x"]: t.state.name for t in study.trials}
    assert states[4.0] == "COMPLETE"  # the first at a rung always goes on
    assert states[5.0] == "PRUNED"  # behind 4.0 and 1.0 at the first rung
    assert states[9.0] == "PRUNED" and states[8.0] == "PRUNED"
    assert states[3.0] == "PRUNED"  # through the first rung (top half of 4), not the second (best of 3 goes on)
    assert states[2.0] == "COMPLETE"
    assert best_feasible_value(study.trials) == 2.0  # 1.0 completed, but it is infeasible


def test_one_rung_needs_no_pruner():
    assert isinstance(halving_pruner([12]), optuna.pruners.NopPruner)


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


def test_a_result_without_a_raced_baseline_says_why_instead_of_a_speedup():
    from autotune.analysis.summary import format_result
    from autotune.pipeline.record import SearchResult

    fast = _finalist([150, 151, 150])
    result = SearchResult("s", fast, None, [fast], [], baseline_skipped="estimated 9000 MB would pass the budget")
    text = format_result(result)
    assert result.speedup_p95 is None and "n/a" in text and "not raced: estimated 9000 MB" in text


def _feasible_trials(space: SearchSpace, p95_by_batch: dict[int, float]) -> optuna.Study:
    """A study holding one feasible trial per batch size (1 thread, no sort, fp32), with these values."""
    study = optuna.create_study()
    for batch, value in p95_by_batch.items():
        study.add_trial(optuna.trial.create_trial(
            params={**EngineConfig(batch, 1, False, "fp32").to_dict()},
            distributions={k: optuna.distributions.CategoricalDistribution(v)
                           for k, v in space.dimensions().items()},
            value=value, constraints={"parity": 0.0, "memory": 0.0}))
    return study


def test_finalists_skip_what_the_refinement_beat_side_by_side_but_keep_the_pick():
    from autotune.search.finalists import finalists_from

    space = SearchSpace(batch_sizes=(1, 2, 4), threads=(1,), length_sort=(False,), precisions=("fp32",))
    study = _feasible_trials(space, {1: 10.0, 2: 11.0, 4: 12.0})
    pick, beaten = EngineConfig(1, 1, False, "fp32"), EngineConfig(2, 1, False, "fp32")
    configs = finalists_from(study, space, 3, first=pick, beaten=[beaten, pick])
    assert configs[0] == space.baseline() and configs[1] == pick
    assert beaten not in configs and EngineConfig(4, 1, False, "fp32") in configs


def test_finalists_race_the_refinements_runners_up_before_the_other_trials():
    from autotune.search.finalists import finalists_from

    space = SearchSpace(batch_sizes=(1, 2, 4, 8), threads=(1,), length_sort=(False,), precisions=("fp32",))
    study = _feasible_trials(space, {1: 10.0, 2: 11.0, 4: 12.0})
    pick, close = EngineConfig(1, 1, False, "fp32"), EngineConfig(8, 1, False, "fp32")
    configs = finalists_from(study, space, 3, first=pick, runners_up=[close])
    assert configs == [space.baseline(), pick, close, EngineConfig(2, 1, False, "fp32")]




def test_each_rejected_trial_records_what_rejected_it():
    from autotune.search.study import trial_records

    space = SearchSpace(batch_sizes=(1, 2, 4), threads=(1,), length_sort=(False,), precisions=("fp32",))
    study = optuna.create_study()
    attrs = [{"rejected": "Spearman 0.5 < 0.99", "parity": {"passed": False}},
             {"rejected": "estimated 900 MB would pass the memory budget"},
             {"rejected": "2 workers x 2 threads need more than the 2 usable cores"}, {}]
    for batch, user_attrs in zip((1, 2, 4, 1), attrs, strict=True):
        study.add_trial(optuna.trial.create_trial(
            params=EngineConfig(batch, 1, False, "fp32").to_dict(), user_attrs=user_attrs,
            distributions={k: optuna.distributions.CategoricalDistribution(v) for k, v in space.dimensions().items()},
            value=1.0))
    assert [r.cause for r in trial_records(study)] == ["parity", "memory", "cores", None]


def test_a_tie_goes_to_fp32():
    """Issue 51, item 6: when the race cannot tell int8 from fp32, the pick is the one that changes no result."""
    from dataclasses import replace

    fp32 = _finalist([152, 149, 160])
    int8 = replace(_finalist([150, 158, 146]), config=replace(fp32.config, precision="int8"))
    winner, warnings = choose([int8, fp32])
    assert winner is fp32 and any("tied within the noise" in w and "picked fp32" in w for w in warnings)
    clear = replace(_finalist([100, 101, 100]), config=replace(fp32.config, precision="int8"))
    winner, warnings = choose([clear, fp32])  # a clear win is int8's to keep
    assert winner is clear and not any("picked fp32" in w for w in warnings)
    one_round = [replace(_finalist([120]), config=replace(fp32.config, precision="int8")), _finalist([130])]
    assert choose(one_round)[0] is one_round[0]  # one round has no spread: no tie, the faster


def test_a_new_study_starts_from_the_seeds_in_its_space_and_a_resumed_one_is_left_alone():
    """Issue 51, item 4: the first trials are known good points, so a search cut short starts from them."""
    from autotune.search.study import WARM_SEEDS, warm_start

    space = SearchSpace(batch_sizes=(1, 2, 4), threads=(1, 2), length_sort=(True,), precisions=("fp32",))
    inside, other = EngineConfig(2, 1, True, "fp32"), EngineConfig(4, 2, True, "fp32")
    outside = EngineConfig(32, 1, True, "fp32")  # batch 32 is not in this space
    study = optuna.create_study()
    assert warm_start(study, space, [outside, inside, inside, other]) == [inside, other]
    study.optimize(lambda trial: float(space.suggest(trial).batch_size), n_trials=3)
    first = [EngineConfig.from_dict(t.params) for t in study.trials[:2]]
    assert first == [inside, other]
    assert warm_start(study, space, [other]) == []  # resumed: its sampler goes on where it was
    many = [EngineConfig(b, t, True, "fp32") for b in (1, 2, 4) for t in (1, 2)]
    assert len(warm_start(optuna.create_study(), space, many)) == WARM_SEEDS
