"""The end of a search: the best few re-measured interleaved with the baseline, then the choice."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import optuna
from optuna.trial import TrialState

from autotune.gates.parity import ParityReport
from autotune.measure.stats import (
    NOISY_SPREAD,
    Latency,
    noise_warnings,
    p95_ms,
    per_query_medians,
    percentile,
    relative_spread,
)
from autotune.measure.timing import Load, PassTimer, interleaved_passes
from autotune.runtime.engine import EngineConfig, ScoringPool
from autotune.runtime.space import SearchSpace
from autotune.search.study import PARAMS, config_of, is_feasible
from autotune.workload.queries import Query, Workload

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class Finalist:
    config: EngineConfig
    latency: Latency
    round_p95_ms: list[float]
    parity: ParityReport | None
    is_baseline: bool = False
    single: Latency | None = None  # one query at a time, when `latency` was measured under load
    throughput: dict[int, float] = field(default_factory=dict)  # pairs per second, by concurrency


def finalists_from(study: optuna.Study, space: SearchSpace, k: int, *, first: EngineConfig | None = None,
                   same: Callable[[EngineConfig], EngineConfig] = lambda c: c,
                   with_baseline: bool = True, beaten: Sequence[EngineConfig] = (),
                   runners_up: Sequence[EngineConfig] = ()) -> list[EngineConfig]:
    """The baseline (unless left out), then `first` (the refined pick), up to `k` - 1 of its
    `runners_up` (neighbours the refinement could not tell from it), and the best feasible trials:
    up to `k` besides the baseline, none of them the same effective configuration as another, and
    none that the refinement already found slower beyond the noise (`beaten`). A runner-up comes
    before the other trials: it was timed side by side with the pick, they were not."""
    feasible = [(t.value, t) for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if is_feasible(t) and t.value is not None and set(t.params) == PARAMS]
    baseline = space.baseline()
    chosen: list[EngineConfig] = []
    seen = {same(baseline)} | {same(c) for c in beaten if first is None or same(c) != same(first)}
    ranked = ([first] if first is not None else []) + list(runners_up) + [
        config_of(t) for _, t in sorted(feasible, key=lambda pair: pair[0])]
    for config in ranked:
        if len(chosen) == k:
            break
        if same(config) not in seen:
            seen.add(same(config))
            chosen.append(config)
    return [baseline, *chosen] if with_baseline else chosen


def rerace(pool: ScoringPool, workload: Workload, configs: Sequence[EngineConfig], rounds: int,
           *, baseline_first: bool = True, load: Load | None = None, tie_rounds: int = 0,
           until: float | None = None, workloads: Sequence[Workload] | None = None) -> list[Finalist]:
    """Measure configurations interleaved (A B C A B C ...), rotating the order each round; the first
    is the baseline unless `baseline_first` is false.

    After `rounds`, the contenders still within the noise of the leader (`near_ties`) run up to
    `tie_rounds` more, by themselves, interleaved, while `time.monotonic()` is before `until`: a
    near tie is settled on more rounds, and a clear result costs nothing more. The baseline is
    there to be compared against, not chosen, so it never runs the extra rounds.

    Under a load of several concurrent recalls, each configuration is also timed one query at a time
    in the same rounds: the profile reports both, and the throughput at 1 and at the load's concurrency.

    `workloads`, one per configuration, replays each on its own form of the same queries (a smaller pool,
    shorter candidates: `gates.scope`), query for query, in the same rounds.
    """
    own = list(workloads) if workloads is not None else [workload] * len(configs)
    if len(own) != len(configs) or any(len(w.queries) != len(workload.queries) for w in own):
        raise ValueError("one workload per configuration, each with the same queries")
    load = load or Load()
    loads = load.raced()
    walls: dict[tuple[int, int], list[float]] = {}
    timers: list[PassTimer] = []
    for li, each in enumerate(loads):
        for ci, config in enumerate(configs):
            timer = _shaped(each.timer(pool, config), workload, own[ci])
            timers.append(_walled(timer, len(workload.queries), walls.setdefault((li, ci), [])))
    contenders = range(1 if baseline_first else 0, len(configs))

    def still_in(so_far: list[list[list[float]]]) -> list[int]:
        if max(len(p) for p in so_far) < rounds:
            return list(range(len(timers)))
        if until is not None and time.monotonic() >= until:
            return []
        tied = near_ties({ci: so_far[ci] for ci in contenders})  # ranked on the load Hindsight sends
        return [li * len(configs) + ci for li in range(len(loads)) for ci in tied] if len(tied) > 1 else []

    passes = interleaved_passes(timers, workload.queries, rounds + tie_rounds, still_in=still_in)
    out = []
    for i, config in enumerate(configs):
        mine = passes[i]
        alone = passes[len(configs) + i] if len(loads) > 1 else mine
        rounds_p95 = [percentile(p, 95) * 1000.0 for p in mine]
        pairs = sum(len(q.documents) for q in own[i].queries)
        throughput = {each.concurrency: pairs / float(np.median(walls[(li, i)])) for li, each in enumerate(loads)}
        out.append(Finalist(config, Latency.from_seconds(per_query_medians(mine)), rounds_p95, None,
                            is_baseline=baseline_first and i == 0,
                            single=Latency.from_seconds(per_query_medians(alone)) if len(loads) > 1 else None,
                            throughput=throughput))
    return out


def near_ties(passes: dict[int, list[list[float]]], margin: float = NOISY_SPREAD) -> list[int]:
    """The contenders (by key, with passes[round][query] in seconds) whose p95 of per-query medians is
    within `margin` of the fastest's: the ones more rounds could still reorder. A gap of 10% or more
    is the spread at which pyperf calls repeats noisy, so it is taken as real."""
    p95 = {key: p95_ms(rounds) for key, rounds in passes.items() if rounds}
    if not p95:
        return []
    leader = min(p95.values())
    return sorted((key for key, value in p95.items() if value <= leader * (1.0 + margin)), key=p95.__getitem__)


def _shaped(timer: PassTimer, workload: Workload, own: Workload) -> PassTimer:
    """The timer, handed its configuration's own form of each query it is asked to replay."""
    if own is workload:
        return timer
    index = {id(q): i for i, q in enumerate(workload.queries)}
    return lambda queries: timer([own.queries[index[id(q)]] for q in queries])


def _walled(timer: PassTimer, full: int, walls: list[float]) -> PassTimer:
    """The timer, keeping each whole pass's wall time (for throughput; warm-up passes are shorter)."""
    def timed(queries: Sequence[Query]) -> list[float]:
        started = time.perf_counter()
        seconds = timer(queries)
        if len(queries) == full:
            walls.append(time.perf_counter() - started)
        return seconds
    return timed


def challenge(incumbent: Finalist, challenger: Finalist) -> tuple[Finalist, str]:
    """A rerun's committed pick stays unless the challenger beats it beyond the noise: faster in every round
    the two ran side by side, and by more than either's round-to-round spread (at least NOISY_SPREAD, where
    pyperf starts to warn). A profile in version control must not churn on a lucky race."""
    if challenger is incumbent:
        return incumbent, f"the committed pick {incumbent.config.label()} won the race again: kept"
    rounds = list(zip(incumbent.round_p95_ms, challenger.round_p95_ms, strict=False))
    every_round = bool(rounds) and all(c < i for i, c in rounds)
    gain = incumbent.latency.p95_ms / challenger.latency.p95_ms - 1.0
    noise = max(NOISY_SPREAD, relative_spread(incumbent.round_p95_ms), relative_spread(challenger.round_p95_ms))
    if every_round and gain > noise:
        return challenger, (f"{challenger.config.label()} beat the committed pick {incumbent.config.label()} beyond "
                            f"the noise ({gain:.0%} faster, in every round): replaced")
    return incumbent, (f"kept the committed pick {incumbent.config.label()}: {challenger.config.label()} was "
                       f"{gain:+.0%} at p95, within the noise ({noise:.0%}"
                       + ("" if every_round else ", and not faster in every round") + ")")


EXACTNESS = {"fp32": 0, "int8": 1}  # what changes the results least comes first


def choose(finalists: list[Finalist]) -> tuple[Finalist, list[str]]:
    """The fastest; but where the race cannot tell the fastest from an exacter finalist (their gap is within the
    run-to-run spread), the exacter one: fp32 over int8, since a tie buys no speed for what int8 changes."""
    ranked = sorted(finalists, key=lambda f: f.latency.p95_ms)
    spreads = {f.config.label(): relative_spread(f.round_p95_ms) for f in finalists}
    gap = (ranked[1].latency.p95_ms / ranked[0].latency.p95_ms - 1.0) if len(ranked) > 1 else None
    warnings = noise_warnings(spreads, gap)
    leader, noise = ranked[0], max(spreads.values(), default=0.0)
    tied = [f for f in ranked if f is leader or f.latency.p95_ms / leader.latency.p95_ms - 1.0 < noise]
    exact = min(tied, key=lambda f: (EXACTNESS.get(f.config.precision, 0), f.latency.p95_ms))
    if EXACTNESS.get(exact.config.precision, 0) < EXACTNESS.get(leader.config.precision, 0):
        warnings.append(f"{leader.config.label()} and {exact.config.label()} are tied within the noise "
                        f"({exact.latency.p95_ms / leader.latency.p95_ms - 1.0:.1%} apart, spread {noise:.1%}): "
                        f"picked {exact.config.precision}, which changes no result")
    return exact, warnings
