"""One trial: a parity pass that doubles as warm-up, then timed passes with pruning."""

from __future__ import annotations

import numpy as np
import optuna
import psutil
from optuna.trial import FrozenTrial, TrialState

from autotune.runtime.engine import ScoringPool
from autotune.search.measure import measure, replay, warm_up
from autotune.search.parity import compare
from autotune.search.space import SearchSettings, SearchSpace
from autotune.search.stats import per_query_medians, percentile
from autotune.workload.queries import Workload


class Objective:
    """One trial: a parity pass that doubles as warm-up, then timed passes with pruning."""

    def __init__(self, pool: ScoringPool, workload: Workload, reference: list[np.ndarray],
                 space: SearchSpace, settings: SearchSettings) -> None:
        self.pool, self.workload, self.reference = pool, workload, reference
        self.space, self.settings = space, settings

    def __call__(self, trial: optuna.Trial) -> float:
        config = self.space.suggest(trial)
        earlier = self._measured(trial)
        if earlier is not None:  # the study holds this configuration: reuse its figures, measure nothing
            trial.set_user_attr("duplicate_of", earlier.number)
            for key in ("parity", "rejected", "per_query_median_ms", "padding_overhead", "rss_mb"):
                if key in earlier.user_attrs:
                    trial.set_user_attr(key, earlier.user_attrs[key])
            trial.set_constraint("parity", (earlier.constraints or {}).get("parity", 0.0))
            return float(earlier.value)  # type: ignore[arg-type]
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
        trial.set_user_attr("rss_mb", round(psutil.Process().memory_info().rss / 2**20, 1))
        return percentile(medians, 95) * 1000.0

    @staticmethod
    def _measured(trial: optuna.Trial) -> FrozenTrial | None:
        for done in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if done.params == trial.params and done.value is not None:
                return done
        return None
