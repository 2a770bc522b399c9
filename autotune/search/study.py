"""The Optuna study: a seeded TPE search over the target's knobs.

Trials that fail parity are marked infeasible with `Trial.set_constraint`, so they are
never chosen; a trial clearly slower than the best so far is pruned between passes.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.errors import OptionsError, first_line
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
    duplicate_of: int | None = None  # a configuration the study already held: its figures were reused

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, **self.config.to_dict(), "state": self.state,
                "p95_ms": self.p95_ms, "rejected": self.rejected, "rss_mb": self.rss_mb,
                "duplicate_of": self.duplicate_of}


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
                                   t.user_attrs.get("rss_mb"), t.user_attrs.get("duplicate_of")))
    return records

JOURNAL_NAME = "studies.journal"


def open_storage(storage: str | None, *, fresh: bool = False) -> Any:
    """The study storage, opened (and so checked) before anything is measured.

    A bad URL, an unreachable database or a corrupt journal is one line with exit 4. With
    `--fresh`, a corrupt journal is moved aside (its studies are lost, and the message says so).
    """
    if storage is not None:
        try:
            return optuna.storages.get_storage(storage)
        except Exception as exc:  # sqlalchemy raises many kinds: bad scheme, missing driver, unreachable file
            raise OptionsError(f"--storage {_redact(storage)} cannot be opened: {first_line(exc)}") from exc
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    state_dir().mkdir(parents=True, exist_ok=True)
    path = state_dir() / JOURNAL_NAME
    try:
        _check_journal(path)  # every complete line now, so a corrupt one shows here and not mid-run
        return JournalStorage(JournalFileBackend(str(path)))
    except (ValueError, KeyError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        if not fresh:
            raise OptionsError(f"the study journal {path} is corrupt ({first_line(exc)}): rerun with --fresh to "
                               "set it aside and start over") from exc
        aside = path.with_name(f"{JOURNAL_NAME}.corrupt-{int(time.time())}")
        path.rename(aside)
        return JournalStorage(JournalFileBackend(str(path)))


def _check_journal(path: Path) -> None:
    """Each complete line of an Optuna journal is one JSON object (a torn last line is Optuna's to skip)."""
    import json

    if not path.exists():
        return
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            if line.endswith(b"\n") and line.strip() and not isinstance(json.loads(line), dict):
                raise ValueError(f"line {number} is not a journal entry")


def _redact(url: str) -> str:
    """Never print a password that sits in a storage URL."""
    import re

    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)



def open_study(name: str, store: Any, seed: int, ratio: float, fresh: bool) -> optuna.Study:
    """Create or resume a study. A resumed study's sampler continues from where the last run stopped:
    seeded by the seed and the number of trials it holds, so it never replays the first suggestions."""
    if fresh:
        with contextlib.suppress(KeyError):
            optuna.delete_study(study_name=name, storage=store)
    study = optuna.create_study(study_name=name, storage=store, load_if_exists=True, direction="minimize",
                                pruner=SlowerThanBestPruner(ratio))
    done = len(study.get_trials(deepcopy=False))
    study.sampler = optuna.samplers.TPESampler(seed=seed + done, n_startup_trials=8)
    return study
