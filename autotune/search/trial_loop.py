"""The trial loop: ask, suggest, measure, tell, until the study holds as many trials as asked.

It uses Optuna's public ask-and-tell interface only, so a study on any storage (a journal file, SQLite,
PostgreSQL shared by several hosts) runs the same way; `gate` serializes the asking between hosts.
"""

from __future__ import annotations

import contextlib
import socket
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.search.study import FINISHED, HOST_ATTR, HOST_NAME_ATTR, UNMEASURED, finished_trials, host_id

if TYPE_CHECKING:
    from autotune.search.objective import Objective


def fail_stale_trials(study: optuna.Study) -> int:
    """Trials this host left RUNNING when it was killed are failed (its run lock says none is live).

    Another host's running trials, in a shared study, are that host's: they are left alone.
    """
    me = host_id()
    stale = [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
             if t.user_attrs.get(HOST_ATTR, me) == me]
    for t in stale:
        study.tell(t.number, state=TrialState.FAIL)
    return len(stale)


TAKEN = (*FINISHED, TrialState.RUNNING)  # counted against --trials
MAX_ASKS = 4  # asks per trial at most, refusals before measuring included


def run_study(
    study: optuna.Study,
    objective: Objective,
    trials: int,
    *,
    timeout_s: float | None = None,
    on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
    gate: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    wait_for_others_s: float = 1800.0,
) -> int:
    """Run trials until the study holds `trials` (finished or running, on any host), within `timeout_s`;
    returns how many were already done (resumed).

    Counting, asking and suggesting happen under `gate` (a database lock when several hosts share the
    study), so hosts split the trials and the total is what was asked. At the end it waits for the
    other hosts' running trials, so every host re-races from the whole study.
    """
    me, name = host_id(), socket.gethostname()
    with gate():
        fail_stale_trials(study)
        done = sum(not t.user_attrs.get(UNMEASURED) for t in finished_trials(study))
    started = time.monotonic()
    # a study with no trial yet gets one whatever the time left: a search of none can only end the run
    one_at_least = done == 0
    if timeout_s is not None and timeout_s <= 0 and not one_at_least:
        return done
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=optuna.exceptions.ExperimentalWarning)
        while one_at_least or timeout_s is None or time.monotonic() - started < timeout_s:
            with gate():
                taken = study.get_trials(deepcopy=False, states=TAKEN)
                # a refusal before measuring spends no trial, up to a bound: a space the cores or the memory
                # refuse nearly everywhere must still end
                if sum(not t.user_attrs.get(UNMEASURED) for t in taken) >= trials or len(taken) >= MAX_ASKS * trials:
                    break
                trial = study.ask()
                trial.set_user_attr(HOST_ATTR, me)
                trial.set_user_attr(HOST_NAME_ATTR, name)
                # Suggested before the lock is let go: another host looking for a duplicate then sees
                # every parameter of this trial, never a half-suggested one it would take for different.
                objective.space.suggest(trial)
            frozen = _evaluate(study, objective, trial)
            one_at_least = one_at_least and bool(frozen.user_attrs.get(UNMEASURED))  # refused: ask again
            if on_trial is not None:
                on_trial(study, frozen)
    _wait_for_others(study, me, min(wait_for_others_s, _left(timeout_s, started)))
    return done


def _evaluate(study: optuna.Study, objective: Objective, trial: optuna.Trial) -> FrozenTrial:
    """What `study.optimize` does for one trial: pruned and failed trials are told so; errors propagate."""
    try:
        value = objective(trial)
    except optuna.TrialPruned:
        return study.tell(trial, state=TrialState.PRUNED)
    except KeyboardInterrupt:
        # Nothing more is written once interrupted: the run is stopping, and says so at once. The trial
        # stays RUNNING until this host's next run fails it (`fail_stale_trials`).
        raise
    except BaseException:
        study.tell(trial, state=TrialState.FAIL)
        raise
    return study.tell(trial, value)


def _wait_for_others(study: optuna.Study, me: str, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and any(
            t.user_attrs.get(HOST_ATTR, me) != me and is_live(study, t)
            for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))):
        time.sleep(1.0)


def is_live(study: optuna.Study, trial: FrozenTrial) -> bool:
    """A running trial that has not yet run three times as long as the study's trials take (at least a
    minute): past that, its host has likely died, and nobody should wait for it."""
    import datetime
    import statistics

    took = [(t.datetime_complete - t.datetime_start).total_seconds() for t in finished_trials(study)
            if t.datetime_start is not None and t.datetime_complete is not None]
    patience = max(60.0, 3.0 * statistics.median(took)) if took else 600.0
    started = trial.datetime_start
    return started is None or (datetime.datetime.now() - started).total_seconds() < patience


def _left(timeout_s: float | None, started: float) -> float:
    return float("inf") if timeout_s is None else max(0.0, timeout_s - (time.monotonic() - started))
