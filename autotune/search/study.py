"""The Optuna study: a seeded TPE search over the target's knobs, and what its trials say.

Trials that fail parity or pass the memory budget are marked infeasible with
`Trial.set_constraint`, so they are never chosen; Optuna's `SuccessiveHalvingPruner` stops a
trial that is not in the better half at the same number of queries (see `objective`). Where the
study is kept is `storage`; how its trials are run is `trial_loop`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.paths import state_dir
from autotune.runtime.engine import EngineConfig
from autotune.runtime.space import SearchSpace
from autotune.search.verdicts import VERDICTS_STUDY

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
    return config_of(min(trials, key=lambda t: t.value or 0.0)) if trials else None


@dataclass(frozen=True)
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
    unmeasured: bool = False  # refused before measuring: it spent no trial
    cause: str | None = None  # what rejected it: "parity", "memory" or "cores"

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, **self.config.to_dict(), "state": self.state,
                "p95_ms": self.p95_ms, "rejected": self.rejected, "rss_mb": self.rss_mb,
                "peak_growth_mb": self.peak_growth_mb, "estimated_mb": self.estimated_mb,
                "queries_measured": self.queries_measured, "duplicate_of": self.duplicate_of,
                "unmeasured": self.unmeasured, "cause": self.cause}


HOST_ATTR = "host_id"  # which host ran a trial: a shared study's trials come from several
# a trial refused before anything was measured (the cores or the memory estimate): it costs no time, and does not
# count against --trials
UNMEASURED = "unmeasured"
HOST_NAME_ATTR = "host"


def host_id() -> str:
    """This host's identity in shared studies, kept in its state directory."""
    import uuid

    path = state_dir() / "host-id"
    state_dir().mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(uuid.uuid4().hex[:16])
    return path.read_text().strip()


FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def finished_trials(study: optuna.Study) -> list[FrozenTrial]:
    return study.get_trials(deepcopy=False, states=FINISHED)



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
        cause = (None if not rejected else "parity" if "parity" in attrs
                 else "cores" if "usable cores" in str(rejected) else "memory")
        records.append(TrialRecord(t.number, config_of(t), t.state.name.lower(), value, rejected,
                                   attrs.get("rss_mb"), attrs.get("duplicate_of"), attrs.get("peak_growth_mb"),
                                   attrs.get("estimated_mb"), attrs.get("queries_measured"),
                                   bool(attrs.get(UNMEASURED)), cause))
    return records

def halving_pruner(rungs: Sequence[int]) -> optuna.pruners.BasePruner:
    """Optuna's successive halving with queries as the resource: rungs at the first rung's size, doubling."""
    if len(rungs) < 2:
        return optuna.pruners.NopPruner()
    return optuna.pruners.SuccessiveHalvingPruner(min_resource=rungs[0], reduction_factor=2,
                                                  min_early_stopping_rate=0)


def open_study(name: str, store: Any, seed: int, rungs: Sequence[int], fresh: bool) -> optuna.Study:
    """Create or resume a study. A resumed study's sampler continues from where the last run stopped:
    seeded by the seed and the number of trials it holds, so it never replays the first suggestions.
    In a shared database each host's sampler also takes its host id, and `constant_liar` makes it
    steer clear of what other hosts are running, so hosts do not suggest the same configurations."""
    if fresh:
        with contextlib.suppress(KeyError):
            optuna.delete_study(study_name=name, storage=store)
    study = optuna.create_study(study_name=name, storage=store, load_if_exists=True, direction="minimize",
                                pruner=halving_pruner(rungs))
    done = len(study.get_trials(deepcopy=False))
    shared = isinstance(store, optuna.storages.RDBStorage)
    salt = int(host_id(), 16) % 2**31 if shared else 0
    study.sampler = optuna.samplers.TPESampler(seed=(seed + done + salt) % 2**32, n_startup_trials=8,
                                               constant_liar=shared)
    return study


@dataclass(frozen=True)
class StudySummary:
    """One study in a storage, as `autotune studies` lists it."""

    name: str
    target: str
    fingerprint: str
    model: str
    workload: str
    trials_done: int
    best_p95_ms: float | None
    hosts: tuple[str, ...]

    @classmethod
    def parse(cls, study: optuna.Study) -> StudySummary:
        parts = study.study_name.split("-")
        named = len(parts) == 6 and parts[0] == "autotune"
        trials = [t for t in finished_trials(study) if not t.user_attrs.get(UNMEASURED)]
        hosts = sorted({str(t.user_attrs[HOST_NAME_ATTR]) for t in study.get_trials(deepcopy=False)
                        if HOST_NAME_ATTR in t.user_attrs})
        return cls(study.study_name, parts[1] if named else "?", parts[2] if named else "?",
                   parts[3] if named else "?", parts[4] if named else "?", len(trials),
                   best_feasible_value([t for t in trials if t.state == TrialState.COMPLETE]), tuple(hosts))


def study_summaries(store: Any) -> list[StudySummary]:
    """Every study in the storage: autotune's own names say which target, host type, model and workload. The
    verdicts kept beside them (`verdicts.py`) are no search."""
    names = [s.study_name for s in optuna.get_all_study_summaries(storage=store, include_best_trial=False)
             if s.study_name != VERDICTS_STUDY]
    return [StudySummary.parse(optuna.load_study(study_name=n, storage=store)) for n in sorted(names)]


WARM_SEEDS = 4  # configurations a new study starts from, before its sampler's own


def earlier_picks(store: Any, prefix: str, this: str) -> list[EngineConfig]:
    """The best feasible configuration of each other study of this host type and target (`prefix`): the host's
    last picks, on other workloads or models, newest name last (which is no order of time; all are seeds)."""
    out = []
    for summary in optuna.get_all_study_summaries(storage=store, include_best_trial=False):
        if summary.study_name.startswith(prefix) and summary.study_name != this:
            best = best_feasible_config(optuna.load_study(study_name=summary.study_name, storage=store))
            if best is not None:
                out.append(best)
    return out


def warm_start(study: optuna.Study, space: SearchSpace, seeds: Sequence[EngineConfig]) -> list[EngineConfig]:
    """Enqueue the first `WARM_SEEDS` of `seeds` that are in the space as a new study's first trials, so a
    search cut short still starts from good points (issue 51); a resumed study is left as it is."""
    if study.get_trials(deepcopy=False):
        return []
    dims = space.dimensions()
    chosen: list[EngineConfig] = []
    for config in seeds:
        params = config.to_dict()
        inside = all(params[k] in values for k, values in dims.items()) and space.fits(config)
        if inside and config not in chosen:
            chosen.append(config)
        if len(chosen) == WARM_SEEDS:
            break
    for config in chosen:
        study.enqueue_trial(config.to_dict(), skip_if_exists=True)
    return chosen
