"""The Optuna study: a seeded TPE search over batch size, threads, length sort and precision.

Trials that fail parity are marked infeasible with `Trial.set_constraint`, so they are
never chosen; a trial clearly slower than the best so far is pruned between passes.
Before choosing, the best few feasible configurations are re-measured interleaved with
the baseline, so a lucky trial does not win.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.engine import BASELINE, BATCH_SIZES, EngineConfig
from autotune.errors import OptionsError
from autotune.measure import interleaved, measure, replay, warm_up
from autotune.model import PRECISIONS
from autotune.parity import FP32_TOLERANCE, INT8_TOLERANCE, ParityReport, Tolerance, compare
from autotune.sessions import EnginePool
from autotune.stats import Latency, noise_warnings, per_query_medians, percentile, relative_spread
from autotune.workload import Workload

optuna.logging.set_verbosity(optuna.logging.ERROR)  # our own messages say what matters


@dataclass(frozen=True)
class SearchSpace:
    batch_sizes: tuple[int, ...]
    threads: tuple[int, ...]
    length_sort: tuple[bool, ...] = (False, True)
    precisions: tuple[str, ...] = PRECISIONS

    @classmethod
    def for_host(
        cls,
        *,
        usable_cores: int,
        max_candidates: int,
        batch_sizes: Sequence[int] | None = None,
        precisions: Sequence[str] | None = None,
        max_threads: int | None = None,
    ) -> SearchSpace:
        """Batch sizes are capped at the most candidates any query has (larger ones are identical)."""
        grid = tuple(batch_sizes) if batch_sizes else BATCH_SIZES
        if any(b < 1 for b in grid):
            raise OptionsError("batch sizes must be positive integers")
        capped = tuple(sorted({min(b, max_candidates) for b in grid}))
        top = usable_cores if max_threads is None else max_threads
        if top < 1:
            raise OptionsError(f"--max-threads must be at least 1, got {top}")
        prec = tuple(precisions) if precisions else PRECISIONS
        bad = [p for p in prec if p not in PRECISIONS]
        if bad:
            raise OptionsError(f"unknown precision {bad[0]!r}; choose from {', '.join(PRECISIONS)}")
        # 0 is onnxruntime's own default (the baseline's); 1..usable are explicit pools.
        return cls(batch_sizes=capped, threads=tuple(range(0, top + 1)), precisions=prec)

    def suggest(self, trial: optuna.Trial) -> EngineConfig:
        return EngineConfig(
            batch_size=int(trial.suggest_categorical("batch_size", list(self.batch_sizes))),
            intra_op_threads=int(trial.suggest_categorical("intra_op_threads", list(self.threads))),
            length_sort=bool(trial.suggest_categorical("length_sort", list(self.length_sort))),
            precision=str(trial.suggest_categorical("precision", list(self.precisions))),
        )

    def baseline(self) -> EngineConfig:
        """Hindsight's default, as it behaves on this workload (batch 32, capped like the rest)."""
        return EngineConfig(batch_size=min(BASELINE.batch_size, max(self.batch_sizes)),
                            intra_op_threads=0, length_sort=False, precision="fp32")

    def size(self) -> int:
        return len(self.batch_sizes) * len(self.threads) * len(self.length_sort) * len(self.precisions)

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.__dict__, sort_keys=True, default=list).encode()).hexdigest()[:8]


@dataclass(frozen=True)
class SearchSettings:
    trials: int = 30
    timeout_s: float | None = None
    seed: int = 0
    repeats: int = 3
    finalists: int = 3
    final_rounds: int = 3
    prune_ratio: float = 1.5
    fp32_tolerance: Tolerance = FP32_TOLERANCE
    int8_tolerance: Tolerance = INT8_TOLERANCE

    def __post_init__(self) -> None:
        for name in ("trials", "repeats", "final_rounds"):
            if getattr(self, name) < 1:
                raise OptionsError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise OptionsError(f"--timeout must be positive, got {self.timeout_s}")
        if self.prune_ratio <= 1.0:
            raise OptionsError("--prune-ratio must be above 1")

    def tolerance(self, precision: str) -> Tolerance:
        return self.fp32_tolerance if precision == "fp32" else self.int8_tolerance


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


def config_of(trial: FrozenTrial) -> EngineConfig:
    return EngineConfig(**{k: trial.params[k] for k in ("batch_size", "intra_op_threads", "length_sort",
                                                         "precision")})


@dataclass
class TrialRecord:
    number: int
    config: EngineConfig
    state: str
    p95_ms: float | None
    rejected: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, **self.config.to_dict(), "state": self.state,
                "p95_ms": self.p95_ms, "rejected": self.rejected}


@dataclass
class Finalist:
    config: EngineConfig
    latency: Latency
    round_p95_ms: list[float]
    parity: ParityReport | None
    is_baseline: bool = False


@dataclass
class SearchResult:
    study_name: str
    winner: Finalist
    baseline: Finalist
    finalists: list[Finalist]
    trials: list[TrialRecord]
    warnings: list[str] = field(default_factory=list)
    resumed_trials: int = 0

    @property
    def speedup_p95(self) -> float:
        return self.baseline.latency.p95_ms / self.winner.latency.p95_ms

    @property
    def rejected(self) -> list[TrialRecord]:
        return [t for t in self.trials if t.rejected]


class Objective:
    """One trial: a parity pass that doubles as warm-up, then timed passes with pruning."""

    def __init__(self, pool: EnginePool, workload: Workload, reference: list[np.ndarray],
                 space: SearchSpace, settings: SearchSettings) -> None:
        self.pool, self.workload, self.reference = pool, workload, reference
        self.space, self.settings = space, settings

    def __call__(self, trial: optuna.Trial) -> float:
        config = self.space.suggest(trial)
        engine = self.pool.engine(config)
        warm_up(engine, self.workload.queries)
        first = replay(engine, self.workload.queries, keep_scores=True)
        report = compare(self.reference, first.scores, self.settings.tolerance(config.precision))
        trial.set_user_attr("parity", report.to_dict())
        trial.set_constraint("parity", report.violation)
        if not report.passed:
            trial.set_user_attr("rejected", report.reason())
            return percentile(first.seconds, 95) * 1000.0  # infeasible: never chosen

        def on_pass(step: int, passes: list[list[float]]) -> None:
            trial.report(percentile(per_query_medians(passes), 95) * 1000.0, step)
            if trial.should_prune():
                raise optuna.TrialPruned()

        passes = measure(engine, self.workload.queries, self.settings.repeats, on_pass)
        medians = per_query_medians(passes)
        trial.set_user_attr("per_query_median_ms", [round(m * 1000.0, 4) for m in medians])
        trial.set_user_attr("padding_overhead", first.padded_tokens / max(first.real_tokens, 1))
        return percentile(medians, 95) * 1000.0


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
        if set(t.params) != {"batch_size", "intra_op_threads", "length_sort", "precision"}:
            continue
        rejected = t.user_attrs.get("rejected")
        value = t.value if t.state == TrialState.COMPLETE else None
        if t.state == TrialState.PRUNED and t.last_step is not None:
            value = t.intermediate_values[t.last_step]  # its running p95 when it was stopped
        records.append(TrialRecord(t.number, config_of(t), t.state.name.lower(), value, rejected))
    return records


def finalists_from(study: optuna.Study, space: SearchSpace, k: int) -> list[EngineConfig]:
    feasible = [(t.value, t) for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if is_feasible(t) and t.value is not None]
    chosen: list[EngineConfig] = []
    for _, t in sorted(feasible, key=lambda pair: pair[0]):
        config = config_of(t)
        if config not in chosen:
            chosen.append(config)
        if len(chosen) == k:
            break
    baseline = space.baseline()
    return [baseline] + [c for c in chosen if c != baseline]


def rerace(pool: EnginePool, workload: Workload, configs: Sequence[EngineConfig], rounds: int) -> list[Finalist]:
    """Measure configurations interleaved (A B C A B C ...), rotating the order each round."""
    passes = interleaved([pool.engine(c).score for c in configs], workload.queries, rounds)
    out = []
    for i, config in enumerate(configs):
        medians = per_query_medians(passes[i])
        rounds_p95 = [percentile(p, 95) * 1000.0 for p in passes[i]]
        out.append(Finalist(config, Latency.from_seconds(medians), rounds_p95, None, is_baseline=(i == 0)))
    return out


def choose(finalists: list[Finalist]) -> tuple[Finalist, list[str]]:
    ranked = sorted(finalists, key=lambda f: f.latency.p95_ms)
    spreads = {f.config.label(): relative_spread(f.round_p95_ms) for f in finalists}
    gap = (ranked[1].latency.p95_ms / ranked[0].latency.p95_ms - 1.0) if len(ranked) > 1 else None
    return ranked[0], noise_warnings(spreads, gap)
