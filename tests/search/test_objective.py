from __future__ import annotations

from dataclasses import replace

import optuna
import pytest

from autotune.gates.parity import Tolerance
from autotune.measure.memory import ESTIMATE_MARGIN, ModelMemory, rss_mb
from autotune.runtime.engine import EngineTraits
from autotune.search.objective import Objective, rung_order, rung_sizes
from autotune.search.space import SearchSettings
from autotune.search.study import halving_pruner, trial_records
from tests.support.setting import SPACE


def _objective(setup, **kwargs) -> Objective:
    pool, workload, reference = setup
    return Objective(pool, workload, reference, SPACE, SearchSettings(repeats=1), **kwargs)


def test_rung_order_is_a_fixed_shuffle_of_every_query(setup):
    _, workload, _ = setup
    order = rung_order(workload)
    assert sorted(order) == list(range(8)) and order == rung_order(workload) and order != list(range(8))


def test_a_full_trial_measures_every_query_and_records_memory(setup):
    objective = _objective(setup, memory_budget_mb=1e6,
                           memory_model=ModelMemory(1.0, 2, 4, 32, 64), lengths=[[10, 20]] * 8)
    study = optuna.create_study(pruner=halving_pruner(objective.rungs))
    study.enqueue_trial({"batch_size": 4, "intra_op_threads": 1, "length_sort": True, "precision": "fp32",
                         "mem_arena": True, "graph": "plain", "spinning": True})
    study.optimize(objective, n_trials=1)
    attrs = study.trials[0].user_attrs
    assert objective.rungs == [2, 4, 8] and attrs["queries_measured"] == 8
    assert len(attrs["per_query_median_ms"]) == 8 and attrs["rss_mb"] > 0 and attrs["estimated_mb"] > 0
    assert study.trials[0].constraints == {"parity": pytest.approx(study.trials[0].constraints["parity"]),
                                           "memory": 0.0}


def test_zero_threads_and_its_resolved_count_are_one_measurement(setup):
    objective = _objective(setup)
    study = optuna.create_study()
    for threads in (0, 1):  # the pool's traits make 0 mean 1
        study.enqueue_trial({"batch_size": 1, "intra_op_threads": threads, "length_sort": False,
                             "precision": "fp32", "mem_arena": True, "graph": "plain", "spinning": True})
    study.optimize(objective, n_trials=2)
    records = trial_records(study)
    assert records[1].duplicate_of == 0 and records[1].p95_ms == records[0].p95_ms


def test_over_the_memory_budget_is_rejected_before_any_session(setup):
    pool = setup[0]
    objective = _objective(setup, memory_budget_mb=1.0, memory_model=ModelMemory(1.0, 2, 4, 32, 64),
                           lengths=[[10, 20]] * 8)
    study = optuna.create_study()
    study.optimize(objective, n_trials=1)
    trial = study.trials[0]
    assert trial.constraints["memory"] > 0 and "memory budget" in trial.user_attrs["rejected"]
    assert pool._backends == {}


def test_a_configuration_runs_only_if_its_estimate_fits_with_the_margin(setup):
    """The estimate has been up to 1.45x under the measured peak: fitting the bare estimate is not enough."""
    pool = setup[0]
    objective = _objective(setup, memory_model=ModelMemory(500.0, 2, 4, 32, 64), lengths=[[10, 20]] * 8)
    config = SPACE.baseline()
    estimate = objective.estimate_mb(config)
    assert estimate is not None and estimate > 1000
    objective = objective.with_budget(rss_mb() + (1.0 + ESTIMATE_MARGIN) / 2 * estimate)
    assert "margin" in (objective.over_budget(config) or "")
    objective = objective.with_budget(rss_mb() + (ESTIMATE_MARGIN + 0.1) * estimate)
    pool.engine(config)
    assert objective.over_budget(config) is None and pool._backends  # fits: the kept session stays


def test_sessions_kept_from_earlier_trials_are_released_before_a_configuration_is_refused(setup):
    pool = setup[0]
    objective = _objective(setup, memory_budget_mb=1.0, memory_model=ModelMemory(1.0, 2, 4, 32, 64),
                           lengths=[[10, 20]] * 8)
    pool.engine(SPACE.baseline())
    assert pool._backends and objective.over_budget(SPACE.baseline()) is not None
    assert pool._backends == {}


def test_a_pruned_trial_records_its_peak_memory(setup):
    objective = _objective(setup, memory_budget_mb=1e6, memory_model=ModelMemory(1.0, 2, 4, 32, 64),
                           lengths=[[10, 20]] * 8)
    study = optuna.create_study(pruner=optuna.pruners.ThresholdPruner(upper=0.0))  # prunes at the first rung
    study.optimize(objective, n_trials=1)
    trial = study.trials[0]
    assert trial.state == optuna.trial.TrialState.PRUNED and trial.user_attrs["queries_measured"] == 2
    assert trial.user_attrs["rss_mb"] > 0 and "peak_growth_mb" in trial.user_attrs


def test_a_configuration_pruned_once_is_pruned_again_without_measuring(setup):
    objective = _objective(setup)
    study = optuna.create_study(pruner=optuna.pruners.ThresholdPruner(upper=0.0))  # prunes at the first rung
    for _ in range(2):
        study.enqueue_trial(SPACE.baseline().to_dict())
    study.optimize(objective, n_trials=2)
    first, again = study.trials
    assert first.state == again.state == optuna.trial.TrialState.PRUNED and first.intermediate_values
    assert again.user_attrs["duplicate_of"] == 0 and not again.intermediate_values  # nothing timed


def test_a_failing_rung_is_infeasible_and_stops_measuring(setup):
    pool, workload, reference = setup
    strict = Tolerance(max_abs=-1.0, min_spearman=1.0, min_topk=1.0)  # nothing passes
    objective = Objective(pool, workload, reference, SPACE, SearchSettings(repeats=1, fp32_tolerance=strict))
    study = optuna.create_study()
    study.optimize(objective, n_trials=1)
    assert study.trials[0].constraints["parity"] > 0 and study.trials[0].user_attrs["queries_measured"] == 2


def test_rungs_without_halving_are_the_whole_workload(setup):
    pool, workload, reference = setup
    objective = Objective(pool, workload, reference, SPACE, SearchSettings(halving=False))
    assert objective.rungs == [8] and rung_sizes(8, True) == [2, 4, 8]


def test_a_race_keeps_only_the_finalists_whose_sessions_fit_together(setup):
    """Issue 37: the `tei` target's race held every finalist's worker sessions at once and passed 4 GB on a 2 GB
    budget. Each own-session worker is counted once per load the race runs; the first finalists always race."""
    pool, workload, reference = setup
    pool.traits = EngineTraits(zero_threads=1, shared_session=False)
    objective = Objective(pool, workload, reference, SPACE, SearchSettings(repeats=1),
                          memory_model=ModelMemory(100.0, 2, 4, 32, 64), lengths=[[10, 20]] * 8)
    base = SPACE.baseline()
    configs = [replace(base, batch_size=b, workers=2) for b in (1, 2, 3, 4)]
    one = objective.estimate_mb(configs[0]) / 2  # a session: two workers, a session each
    assert objective.race_mb(configs, loads=2) == pytest.approx(2 * one + 4 * 2 * one, rel=0.01)
    room = rss_mb() + ESTIMATE_MARGIN * 6.5 * one  # the first two finalists (6 sessions) fit, a third would not
    kept, left = objective.race_fits(configs, loads=2, keep=2, limit_mb=room)
    assert kept == configs[:2] and left == configs[2:]
    kept, left = objective.race_fits(configs, loads=2, keep=2, limit_mb=rss_mb() + 1.0)
    assert kept == configs[:2]  # the defaults and the pick race whatever the room
    pool.traits = EngineTraits(zero_threads=1, shared_session=True)  # workers on one session: two pooled at most
    assert objective.race_mb(configs, loads=2) == pytest.approx(2 * objective.estimate_mb(configs[0]), rel=0.01)


def test_one_trial_over_the_memory_budget_is_rejected_and_the_search_goes_on(setup, monkeypatch):
    """Issue 46, item 12: the guard stopped the whole run at trial 2 of a search that then passed when rerun. The
    trial that held the memory is rejected, its sessions are released, and the next trial is measured."""
    import mmap
    import time

    from autotune.measure.memory_guard import MemoryGuard, check

    pool = setup[0]
    objective = _objective(setup, memory_budget_mb=1e6)
    held: list[mmap.mmap] = []
    measure, release = objective._measure, pool.release

    def greedy_first(trial, config):  # type: ignore[no-untyped-def]
        if trial.number == 0:  # this configuration's batch holds 400 MB of fresh pages, then the guard trips
            block = mmap.mmap(-1, 400 * 2**20)
            for page in range(0, len(block), mmap.PAGESIZE):
                block[page] = 1
            held.append(block)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                check()
                time.sleep(0.005)
        return measure(trial, config)

    def release_all() -> None:
        while held:
            held.pop().close()
        release()

    monkeypatch.setattr(objective, "_measure", greedy_first)
    monkeypatch.setattr(pool, "release", release_all)
    study = optuna.create_study()
    for batch_size in (4, 1):
        study.enqueue_trial({"batch_size": batch_size, "intra_op_threads": 1, "length_sort": True,
                             "precision": "fp32", "mem_arena": True, "graph": "plain", "spinning": True})
    with MemoryGuard(budget_mb=1e6) as guard:
        guard.limit_mb = rss_mb() + 200  # past what the process holds, short of the spike
        study.optimize(objective, n_trials=2)
    first, second = study.trials
    assert "stopped as the tuner's RSS reached" in first.user_attrs["rejected"] and first.constraints["memory"] > 0
    assert "rejected" not in second.user_attrs and second.user_attrs["queries_measured"] == 8
    assert not held


def test_the_default_budget_makes_room_for_hindsights_defaults_where_the_host_can(setup):
    """Issue 46: `--concurrency 4` dropped the baseline from the race ("estimated 1248 MB would pass the memory
    budget"), though the host could hold it; it is what the user runs today."""
    objective = _objective(setup, memory_model=ModelMemory(500.0, 2, 4, 32, 64), lengths=[[10, 20]] * 8)
    estimate = objective.estimate_mb(SPACE.baseline())
    assert estimate is not None
    small = rss_mb() + estimate  # too small for the estimate's margin
    objective = objective.with_budget(small)
    assert objective.over_budget(SPACE.baseline()) is not None
    assert objective.room_for_baseline(host_mb=rss_mb() + estimate) is None  # the host cannot
    raised = objective.room_for_baseline(host_mb=1e9)
    assert raised is not None and raised > small
    assert objective.memory_budget_mb == small  # the pick stays held to the run's one budget (issue 53)
    roomy = objective.with_budget(raised)
    assert roomy.over_budget(SPACE.baseline()) is None and objective.over_budget(SPACE.baseline()) is not None
    assert roomy.room_for_baseline(host_mb=1e9) is None  # fits now: nothing more to do


def test_the_budget_for_a_set_of_configurations_holds_the_heaviest_with_the_margin(setup):
    objective = _objective(setup, memory_model=ModelMemory(500.0, 2, 4, 32, 64), lengths=[[10, 20]] * 8)
    heaviest = SPACE.heaviest()
    assert heaviest.batch_size == max(SPACE.batch_sizes) and heaviest.precision == "fp32"
    budget = objective.budget_for([SPACE.baseline(), heaviest])
    estimates = [objective.estimate_mb(c) for c in (SPACE.baseline(), heaviest)]
    assert budget is not None and budget >= rss_mb() + 1.5 * max(estimates)  # type: ignore[type-var]
    objective = objective.with_budget(budget)
    assert objective.over_budget(heaviest) is None and objective.over_budget(SPACE.baseline()) is None
