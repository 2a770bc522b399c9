"""The trial loop on Optuna's public ask-and-tell API: what it asks, what it leaves to other hosts, what it fails."""

from __future__ import annotations

import optuna
import pytest

from autotune.runtime.space import SearchSpace


class _BatchSizeObjective:
    """What `run_study` needs of an objective, measuring nothing: the space, and a value per trial."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space

    def __call__(self, trial: optuna.Trial) -> float:
        return float(self.space.suggest(trial).batch_size)


def test_a_trial_is_fully_suggested_before_the_shared_lock_is_let_go():
    """Another host looks for duplicates as soon as it holds the lock: a trial it sees half-suggested
    would look different from its own, and the same configuration would be timed twice."""
    import contextlib

    from autotune.search.trial_loop import run_study

    space = SearchSpace(batch_sizes=(1, 2, 4), threads=(0, 1), precisions=("fp32",))
    study = optuna.create_study()
    seen: list[set[str]] = []

    @contextlib.contextmanager
    def gate():  # type: ignore[no-untyped-def]
        yield
        running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        seen.extend(set(t.params) for t in running)

    run_study(study, _BatchSizeObjective(space), 3, gate=gate, wait_for_others_s=0.0)  # type: ignore[arg-type]
    assert len(seen) == 3 and all(params == set(space.dimensions()) for params in seen)


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_hindsights_defaults_are_not_a_trial():
    """The final re-race times the baseline side by side with the finalists; timing it as a trial too
    (at batch 32, the slowest configuration as a rule) would only spend the search's budget twice. So the
    loop never enqueues it: every trial's batch size is the sampler's own choice."""
    from autotune.search.trial_loop import run_study

    class Counting(optuna.samplers.RandomSampler):
        asked = 0

        def sample_independent(self, study, trial, name, distribution):  # type: ignore[no-untyped-def]
            Counting.asked += name == "batch_size"
            return super().sample_independent(study, trial, name, distribution)

    space = SearchSpace(batch_sizes=(1, 2, 4), threads=(0,), length_sort=(False,), precisions=("fp32",))
    study = optuna.create_study(sampler=Counting(seed=0))
    run_study(study, _BatchSizeObjective(space), 6, wait_for_others_s=0.0)  # type: ignore[arg-type]
    assert len(study.trials) == 6 and Counting.asked == 6  # an enqueued baseline would skip the sampler


def test_a_study_with_no_trial_gets_one_whatever_the_time_left():
    """A `--timeout` spent before the search (a slow pre-check) once left a study of none: the run could only fail.
    A study that already holds trials gets no more once the time is up."""
    from autotune.search.trial_loop import run_study

    space = SearchSpace(batch_sizes=(1, 2, 4), threads=(0,), precisions=("fp32",))
    study = optuna.create_study()
    run_study(study, _BatchSizeObjective(space), 5, timeout_s=0.0, wait_for_others_s=0.0)  # type: ignore[arg-type]
    assert len(study.trials) == 1
    run_study(study, _BatchSizeObjective(space), 5, timeout_s=0.0, wait_for_others_s=0.0)  # type: ignore[arg-type]
    assert len(study.trials) == 1


def _running(study: optuna.Study, host: str | None) -> int:
    from autotune.search.study import HOST_ATTR

    trial = study.ask()
    if host is not None:
        trial.set_user_attr(HOST_ATTR, host)
    return trial.number


def test_only_this_hosts_stale_trials_are_failed():
    from autotune.search.study import host_id
    from autotune.search.trial_loop import fail_stale_trials

    study = optuna.create_study()
    mine, unmarked, theirs = _running(study, host_id()), _running(study, None), _running(study, "another-host")
    assert fail_stale_trials(study) == 2
    states = {t.number: t.state for t in study.trials}
    assert states[mine] == states[unmarked] == optuna.trial.TrialState.FAIL
    assert states[theirs] == optuna.trial.TrialState.RUNNING  # that host's run may still be measuring it


def test_a_running_trial_is_live_until_three_times_the_trials_usual_length():
    """Past that patience its host has likely died: nobody waits for it."""
    import datetime

    from autotune.search.trial_loop import is_live

    now = datetime.datetime.now()
    study = optuna.create_study()
    for took in (100, 120, 140):  # median 120 s: patience 360 s
        trial = optuna.trial.create_trial(value=1.0, params={}, distributions={})
        trial.datetime_start = now - datetime.timedelta(seconds=1000)
        trial.datetime_complete = trial.datetime_start + datetime.timedelta(seconds=took)
        study.add_trial(trial)
    number = study.ask().number
    running = study.trials[number]
    for age, live in ((0, True), (300, True), (400, False)):
        running.datetime_start = now - datetime.timedelta(seconds=age)
        assert is_live(study, running) is live, age
    assert is_live(optuna.create_study(), running)  # no finished trial yet: ten minutes' patience
