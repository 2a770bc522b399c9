"""One trial: checked against the memory budget, then measured rung by rung over the workload.

Successive halving with queries as the resource: a trial is timed on a fixed quarter of the
queries first, reports its p95 there, and Optuna's `SuccessiveHalvingPruner` stops it when it
is not in the better half of the trials measured at the same budget. A survivor goes on to
half the queries, then all of them; nothing measured is measured again. The first pass over
each rung's queries also gives the scores for parity, so parity costs no extra pass.
"""

from __future__ import annotations

import copy
import math
import random
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.gates.parity import compare
from autotune.measure.memory import ESTIMATE_MARGIN, ModelMemory, PeakRss, rss_mb
from autotune.measure.memory_guard import TRIP_SHARE, MemoryTripped, measuring, rearm
from autotune.measure.stats import percentile
from autotune.measure.timing import Load
from autotune.runtime.engine import EngineConfig, ScoringPool, plan_batches
from autotune.runtime.space import SearchSpace
from autotune.search.space import SearchSettings
from autotune.search.study import FINISHED, UNMEASURED
from autotune.search.trial_loop import is_live
from autotune.workload.queries import Workload

COPIED_ATTRS = ("parity", "rejected", "per_query_median_ms", "padding_overhead", "rss_mb", "peak_growth_mb",
                "estimated_mb", "queries_measured", UNMEASURED)


def rung_sizes(n_queries: int, halving: bool) -> list[int]:
    """Queries measured by the end of each rung: a quarter, doubling, then all (one rung without halving)."""
    if not halving or n_queries < 4:
        return [n_queries]
    sizes, size = [], math.ceil(n_queries / 4)
    while size < n_queries:
        sizes.append(size)
        size *= 2
    return [*sizes, n_queries]


def rung_order(workload: Workload) -> list[int]:
    """A fixed shuffle of the queries, the same for every trial of this workload, so that rungs compare
    like with like and no rung is just the workload's first (often shortest) queries."""
    order = list(range(len(workload.queries)))
    random.Random(workload.sha256).shuffle(order)
    return order


class Objective:
    """Minimise the p95 of per-query medians; parity and memory are constraints (feasible when ≤ 0)."""

    def __init__(self, pool: ScoringPool, workload: Workload, reference: list[np.ndarray],
                 space: SearchSpace, settings: SearchSettings, *, memory_budget_mb: float | None = None,
                 memory_model: ModelMemory | None = None, lengths: Sequence[Sequence[int]] | None = None,
                 load: Load | None = None, max_queries: int | None = None) -> None:
        self.pool, self.workload, self.reference = pool, workload, reference
        self.load = load or Load()
        self.space, self.settings = space, settings
        self._budget_mb = memory_budget_mb
        self.memory_model, self.lengths = memory_model, lengths
        self.order = rung_order(workload)  # a trial measures its first `max_queries` (the time plan's sample)
        self.rungs = rung_sizes(min(len(workload.queries), max_queries or len(workload.queries)), settings.halving)

    @property
    def memory_budget_mb(self) -> float | None:
        """The run's one memory budget: set when the objective is made, changed only by `with_budget`."""
        return self._budget_mb

    def with_budget(self, budget_mb: float) -> Objective:
        """The same objective under another budget (the default one follows the model: `phases.precheck`)."""
        other = copy.copy(self)
        other._budget_mb = budget_mb
        return other

    def __call__(self, trial: optuna.Trial) -> float:
        config = self.space.suggest(trial)
        earlier = self._measured(trial, config)
        if earlier is not None:  # the study holds this configuration: reuse its figures, measure nothing
            trial.set_user_attr("duplicate_of", earlier.number)
            for key in COPIED_ATTRS:
                if key in earlier.user_attrs:
                    trial.set_user_attr(key, earlier.user_attrs[key])
            for key, value in earlier.constraints.items():
                trial.set_constraint(key, value)
            if earlier.state == TrialState.PRUNED:  # it lost at a rung once: it would lose there again
                raise optuna.TrialPruned(f"a duplicate of trial {earlier.number}, pruned")
            return math.inf if earlier.value is None else float(earlier.value)
        if not self.space.fits(config):  # never measured: the workers would fight over the cores
            trial.set_constraint("memory", 0.0)
            trial.set_constraint("parity", 1.0)
            trial.set_user_attr("rejected", f"{config.workers} workers x {config.intra_op_threads or 'all'} "
                                            f"threads need more than the {self.space.core_budget} usable cores")
            trial.set_user_attr(UNMEASURED, True)
            return math.inf
        estimate = self.estimate_mb(config)
        if estimate is not None:
            trial.set_user_attr("estimated_mb", round(estimate, 1))
        reason = self.over_budget(config, estimate)
        if reason is not None:  # never run a configuration to the OOM killer
            trial.set_constraint("memory", self._excess_mb(estimate or 0.0))
            trial.set_constraint("parity", 0.0)
            trial.set_user_attr("rejected", reason)
            trial.set_user_attr(UNMEASURED, True)
            return math.inf
        peak = PeakRss()
        measuring(f"trial {trial.number} ({config.label()})")
        try:
            with peak:
                value = self._measure(trial, config)
        except MemoryTripped as tripped:  # this trial, not the run: freed, it is rejected and the search goes on
            self.pool.release()  # which gives the heap back
            if not rearm():
                raise
            trial.set_constraint("memory", max(peak.peak_mb - (self.memory_budget_mb or 0.0), 1.0))
            trial.set_constraint("parity", 0.0)
            trial.set_user_attr("rejected", f"stopped as the tuner's RSS reached {tripped.rss_mb:.0f} MB, past "
                                            f"{TRIP_SHARE:.0%} of the memory budget of {self.memory_budget_mb:.0f} MB")
            return math.inf
        finally:  # a pruned trial ran too: its peak is recorded all the same
            trial.set_user_attr("peak_growth_mb", round(peak.growth_mb, 1))
            trial.set_user_attr("rss_mb", round(peak.peak_mb, 1))
        over = peak.peak_mb - self.memory_budget_mb if self.memory_budget_mb is not None else 0.0
        trial.set_constraint("memory", max(over, 0.0))
        if over > 0 and "rejected" not in trial.user_attrs:
            trial.set_user_attr("rejected", f"peak RSS {peak.peak_mb:.0f} MB passed the memory budget of "
                                            f"{self.memory_budget_mb:.0f} MB")
        return value

    def _measure(self, trial: optuna.Trial, config: EngineConfig) -> float:
        run = self.load.runner(self.pool, config)
        queries = self.workload.queries
        run([queries[i] for i in self.order[:2]])  # warm-up: arenas, thread pools
        medians: dict[int, float] = {}
        scores: dict[int, np.ndarray] = {}
        real = padded = 0
        done = 0
        for size in self.rungs:
            batch = self.order[done:size]
            subset = [queries[i] for i in batch]
            passes = []
            for r in range(self.settings.repeats):
                result = run(subset, keep_scores=r == 0)
                passes.append(result.seconds)
                if r == 0:
                    scores.update(zip(batch, result.scores, strict=True))
                    real, padded = real + result.real_tokens, padded + result.padded_tokens
            for k, i in enumerate(batch):
                medians[i] = float(np.median([p[k] for p in passes]))
            done = size
            measured = sorted(medians)
            tolerance = self.settings.tolerance(config.precision)
            if size < len(queries):  # a mean over a rung's few queries is one query's luck: judged at the end
                tolerance = replace(tolerance, min_topk_mean=0.0)
            report = compare([self.reference[i] for i in measured], [scores[i] for i in measured], tolerance)
            value = percentile([medians[i] for i in measured], 95) * 1000.0
            if not report.passed:
                trial.set_user_attr("parity", report.to_dict())
                trial.set_constraint("parity", report.violation)
                trial.set_user_attr("rejected", report.reason())
                trial.set_user_attr("queries_measured", done)
                return value  # infeasible: never chosen
            if size < len(queries):
                trial.report(value, size)
                if trial.should_prune():
                    trial.set_user_attr("queries_measured", done)
                    raise optuna.TrialPruned()
        trial.set_user_attr("parity", report.to_dict())
        trial.set_constraint("parity", report.violation)
        trial.set_user_attr("per_query_median_ms", [round(medians[i] * 1000.0, 4) for i in range(len(queries))])
        trial.set_user_attr("padding_overhead", padded / max(real, 1))
        trial.set_user_attr("queries_measured", done)
        return value

    def over_budget(self, config: EngineConfig, estimate: float | None = None) -> str | None:
        """Why running `config` would take the tuner past its memory budget, or None when it fits.

        It must fit with the estimate's margin. When it does not beside the sessions the pool keeps
        from earlier trials (an arena stays as large as its largest batch), those are released first.
        """
        estimate = self.estimate_mb(config) if estimate is None else estimate
        if estimate is None or self.memory_budget_mb is None:
            return None
        if self._excess_mb(estimate) > 0:
            self.pool.release()
        if self._excess_mb(estimate) <= 0:
            return None
        return (f"estimated {estimate:.0f} MB (x{ESTIMATE_MARGIN} margin) would pass the memory budget of "
                f"{self.memory_budget_mb:.0f} MB")

    def room_for_baseline(self, host_mb: float) -> float | None:
        """A budget that fits Hindsight's defaults with the estimate's margin, where the current one does not and
        the host (`host_mb`: what it could give the tuner) can; None when no change is needed or possible. The
        caller holds a race to it: the objective's own budget, which the pick was held to, is unchanged."""
        baseline = self.space.baseline()
        estimate = self.estimate_mb(baseline)
        if estimate is None or self.memory_budget_mb is None or self.over_budget(baseline, estimate) is None:
            return None
        needed = self.budget_for([baseline])
        return None if needed is None or needed > host_mb else needed

    def budget_for(self, configs: Sequence[EngineConfig]) -> float | None:
        """The budget that holds each of `configs` with the estimate's margin beside what the tuner holds now
        (rounded up to 64 MB); None where there is no estimate."""
        estimates = [e for e in (self.estimate_mb(c) for c in configs) if e is not None]
        if not estimates or len(estimates) < len(configs):
            return None
        return math.ceil((rss_mb() + ESTIMATE_MARGIN * max(estimates)) / 64 + 1) * 64.0

    def budget_for_race(self, configs: Sequence[EngineConfig]) -> float | None:
        """The budget a race of `configs` needs with the estimate's margin (as `race_fits` counts it)."""
        need = self.race_mb(configs, loads=1)
        return None if need is None else math.ceil((rss_mb() + ESTIMATE_MARGIN * need) / 64 + 1) * 64.0

    def _excess_mb(self, estimate: float) -> float:
        """How far the RSS now plus the estimate with its margin would pass the budget (> 0: it would)."""
        budget = self.memory_budget_mb
        return -math.inf if budget is None else rss_mb() + ESTIMATE_MARGIN * estimate - budget

    def estimate_mb(self, config: EngineConfig) -> float | None:
        """Each worker with this configuration's largest batch, from the workload's real pair lengths (the
        workers may all hold their largest batch at once): a session each, or, where the workers share one
        session, its weights once and the activations once per worker."""
        sizes = self._sizes(config)
        if sizes is None:
            return None
        session, batch = sizes
        if self.pool.traits.shared_session:
            return session + (config.workers - 1) * batch
        return config.workers * session

    def race_mb(self, configs: Sequence[EngineConfig], loads: int) -> float | None:
        """What a race of `configs` holds at once. The pool keeps at most `max_sessions` (two), but each timer's
        workers with sessions of their own (the `tei` target's) hold them from the first round to the last,
        once per load the race runs: summed over the finalists, they once passed 4 GB on a 2 GB budget."""
        sizes = [s for s in (self._sizes(c) for c in configs) if s is not None]
        if not sizes or len(sizes) < len(configs):
            return None
        shared = self.pool.traits.shared_session
        pooled = sorted((s + (c.workers - 1) * b if shared else s for c, (s, b) in zip(configs, sizes, strict=True)),
                        reverse=True)[:self.pool.max_sessions]
        own = 0.0 if shared else sum(loads * (c.workers - 1) * s for c, (s, _) in zip(configs, sizes, strict=True))
        return sum(pooled) + own

    def race_fits(self, configs: Sequence[EngineConfig], loads: int, keep: int, limit_mb: float | None
                  ) -> tuple[list[EngineConfig], list[EngineConfig]]:
        """The longest prefix of `configs` (at least its first `keep`) whose race fits `limit_mb` with the
        estimate's margin beside what the tuner holds now, and the finalists left out."""
        configs = list(configs)
        if limit_mb is None:
            return configs, []
        n = len(configs)
        while n > keep and (need := self.race_mb(configs[:n], loads)) is not None and (
                rss_mb() + ESTIMATE_MARGIN * need > limit_mb):
            n -= 1
        return configs[:n], configs[n:]

    def _sizes(self, config: EngineConfig) -> tuple[float, float] | None:
        """(a session at this configuration's largest batch, that batch's activations) in MB."""
        model = self.memory_model
        if model is None or self.lengths is None:
            return None
        traits = self.pool.traits
        shapes = [shape for lengths in self.lengths
                  for shape in batch_shapes(lengths, config.batch_size, config.length_sort, traits.max_batch_tokens)]
        rows, longest = max(shapes, key=lambda s: model.batch_mb(*s))
        return model.session_mb(rows, longest), model.batch_mb(rows, longest)

    def _measured(self, trial: optuna.Trial, config: EngineConfig, wait_s: float = 1800.0) -> FrozenTrial | None:
        """A finished (complete or pruned) trial that ran the same effective configuration (0 threads
        resolved, and so on).

        In a study shared by several hosts, another host may be running it right now: then this trial
        waits for that one (the earlier-numbered, so two never wait for each other) and reuses it.
        """
        mine = self.pool.effective(config)
        deadline = time.monotonic() + wait_s
        while True:
            running = False
            for other in trial.study.get_trials(deepcopy=False, states=(*FINISHED, TrialState.RUNNING)):
                if other.number == trial.number or set(other.params) != set(trial.params):
                    continue
                if self.pool.effective(EngineConfig.from_dict(other.params)) != mine:
                    continue
                if other.state in FINISHED:  # Optuna never completes a single-objective trial without a value
                    return other
                running = running or (other.state == TrialState.RUNNING and other.number < trial.number
                                      and is_live(trial.study, other))
            if not running or time.monotonic() >= deadline:
                return None
            time.sleep(0.5)


def batch_shapes(lengths: Sequence[int], batch_size: int, length_sort: bool,
                 max_batch_tokens: int | None = None) -> list[tuple[int, int]]:
    """(rows, longest) of each batch, cut as the engine cuts. With a sort, the longest pairs share a
    batch whatever the sort key, so a token-count sort (longest first) stands for all of them."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i]) if length_sort else list(range(len(lengths)))
    return [(len(b), max(lengths[i] for i in b))
            for b in plan_batches(order, list(lengths), batch_size, max_batch_tokens)]

