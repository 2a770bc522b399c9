"""The Optuna study: a seeded TPE search over the target's knobs.

Trials that fail parity are marked infeasible with `Trial.set_constraint`, so they are
never chosen; a trial clearly slower than the best so far is pruned between passes.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.paths import state_dir
from autotune.runtime.engine import EngineConfig

if TYPE_CHECKING:
    from autotune.search.objective import Objective
    from autotune.search.space import SearchSettings

optuna.logging.set_verbosity(optuna.logging.ERROR)  # our own messages say what matters


class SlowerThanBestPruner(optuna.pruners.BasePruner):
    """Prune when a trial's running p95 is `ratio` times the best feasible trial's p95."""

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        step = trial.last_step
        if step is None:
            return False
        best = best_feasible_value(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
        return best is not None and trial.intermediate_values[step] > self.ratio * best


def is_feasible(trial: FrozenTrial) -> bool:
    return all(v <= 0 for v in (trial.constraints or {}).values())


def best_feasible_value(trials: Sequence[FrozenTrial]) -> float | None:
    values = [t.value for t in trials if t.value is not None and is_feasible(t)]
    return min(values) if values else None


PARAMS = frozenset({"batch_size", "intra_op_threads", "length_sort", "precision", "mem_arena"})


def config_of(trial: FrozenTrial) -> EngineConfig:
    return EngineConfig.from_dict(trial.params)


@dataclass
class TrialRecord:
    number: int
    config: EngineConfig
    state: str
    p95_ms: float | None
    rejected: str | None
    rss_mb: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, **self.config.to_dict(), "state": self.state,
                "p95_ms": self.p95_ms, "rejected": self.rejected, "rss_mb": self.rss_mb}


def fail_stale_trials(study: optuna.Study) -> int:
    """Trials left RUNNING by a killed process are failed (the run lock says none is live)."""
    stale = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for t in stale:
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
    return len(stale)


def finished_trials(study: optuna.Study) -> list[FrozenTrial]:
    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))


def run_study(
    study: optuna.Study,
    objective: Objective,
    settings: SearchSettings,
    *,
    on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
) -> int:
    """Run the remaining trials; returns how many were already done (resumed)."""
    fail_stale_trials(study)
    done = len(finished_trials(study))
    if not study.trials:
        study.enqueue_trial(objective.space.baseline().to_dict())
    remaining = settings.trials - done
    if remaining > 0:
        callbacks = [on_trial] if on_trial else []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=optuna.exceptions.ExperimentalWarning)
            study.optimize(objective, n_trials=remaining, timeout=settings.timeout_s, callbacks=callbacks)
    return done


def trial_records(study: optuna.Study) -> list[TrialRecord]:
    records = []
    for t in study.get_trials(deepcopy=False):
        if set(t.params) != PARAMS:
            continue
        rejected = t.user_attrs.get("rejected")
        value = t.value if t.state == TrialState.COMPLETE else None
        if t.state == TrialState.PRUNED and t.last_step is not None:
            value = t.intermediate_values[t.last_step]  # its running p95 when it was stopped
        records.append(TrialRecord(t.number, config_of(t), t.state.name.lower(), value, rejected,
                                   t.user_attrs.get("rss_mb")))
    return records

def open_study(name: str, storage: str | None, seed: int, ratio: float, fresh: bool) -> optuna.Study:
    if storage is None:
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        state_dir().mkdir(parents=True, exist_ok=True)
        backend = JournalFileBackend(str(state_dir() / "studies.journal"))
        store: Any = JournalStorage(backend)
    else:
        store = storage
    if fresh:
        with contextlib.suppress(KeyError):
            optuna.delete_study(study_name=name, storage=store)
    return optuna.create_study(study_name=name, storage=store, load_if_exists=True, direction="minimize",
                               sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=8),
                               pruner=SlowerThanBestPruner(ratio))
