"""The Optuna study: a seeded TPE search over the target's knobs.

Trials that fail parity or pass the memory budget are marked infeasible with
`Trial.set_constraint`, so they are never chosen; Optuna's `SuccessiveHalvingPruner` stops a
trial that is not in the better half at the same number of queries (see `objective`).
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

optuna.logging.set_verbosity(optuna.logging.ERROR)  # our own messages say what matters


def is_feasible(trial: FrozenTrial) -> bool:
    return all(v <= 0 for v in (trial.constraints or {}).values())


def best_feasible_value(trials: Sequence[FrozenTrial]) -> float | None:
    values = [t.value for t in trials if t.value is not None and is_feasible(t)]
    return min(values) if values else None


PARAMS = frozenset(EngineConfig(batch_size=1, intra_op_threads=0, length_sort=False, precision="fp32").to_dict())


def config_of(trial: FrozenTrial) -> EngineConfig:
    return EngineConfig.from_dict(trial.params)


def best_feasible_config(study: optuna.Study) -> EngineConfig | None:
    """The fastest complete trial that passed every constraint, or None when none did."""
    trials = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if t.value is not None and is_feasible(t) and set(t.params) == PARAMS]
    return config_of(min(trials, key=lambda t: t.value)) if trials else None  # type: ignore[arg-type,return-value]


@dataclass
class TrialRecord:
    number: int
    config: EngineConfig
    state: str
    p95_ms: float | None
    rejected: str | None
    rss_mb: float | None = None  # the process's peak RSS while this trial ran
    duplicate_of: int | None = None  # a configuration the study already held: its figures were reused
    peak_growth_mb: float | None = None  # how far this trial raised the RSS above where it started
    estimated_mb: float | None = None  # the estimate made before running it
    queries_measured: int | None = None  # fewer than the workload's when successive halving stopped it

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, **self.config.to_dict(), "state": self.state,
                "p95_ms": self.p95_ms, "rejected": self.rejected, "rss_mb": self.rss_mb,
                "peak_growth_mb": self.peak_growth_mb, "estimated_mb": self.estimated_mb,
                "queries_measured": self.queries_measured, "duplicate_of": self.duplicate_of}


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
    trials: int,
    *,
    timeout_s: float | None = None,
    on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
) -> int:
    """Run the remaining trials, within `timeout_s`; returns how many were already done (resumed)."""
    fail_stale_trials(study)
    done = len(finished_trials(study))
    if not study.trials:
        study.enqueue_trial(objective.space.baseline().to_dict())
    remaining = trials - done
    if remaining > 0 and (timeout_s is None or timeout_s > 0):
        callbacks = [on_trial] if on_trial else []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=optuna.exceptions.ExperimentalWarning)
            study.optimize(objective, n_trials=remaining, timeout=timeout_s, callbacks=callbacks)
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
        attrs = t.user_attrs
        records.append(TrialRecord(t.number, config_of(t), t.state.name.lower(), value, rejected,
                                   attrs.get("rss_mb"), attrs.get("duplicate_of"), attrs.get("peak_growth_mb"),
                                   attrs.get("estimated_mb"), attrs.get("queries_measured")))
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



def halving_pruner(rungs: Sequence[int]) -> optuna.pruners.BasePruner:
    """Optuna's successive halving with queries as the resource: rungs at the first rung's size, doubling."""
    if len(rungs) < 2:
        return optuna.pruners.NopPruner()
    return optuna.pruners.SuccessiveHalvingPruner(min_resource=rungs[0], reduction_factor=2,
                                                  min_early_stopping_rate=0)


def open_study(name: str, store: Any, seed: int, rungs: Sequence[int], fresh: bool) -> optuna.Study:
    """Create or resume a study. A resumed study's sampler continues from where the last run stopped:
    seeded by the seed and the number of trials it holds, so it never replays the first suggestions."""
    if fresh:
        with contextlib.suppress(KeyError):
            optuna.delete_study(study_name=name, storage=store)
    study = optuna.create_study(study_name=name, storage=store, load_if_exists=True, direction="minimize",
                                pruner=halving_pruner(rungs))
    done = len(study.get_trials(deepcopy=False))
    study.sampler = optuna.samplers.TPESampler(seed=seed + done, n_startup_trials=8)
    return study
