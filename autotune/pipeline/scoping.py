"""The scope phase of `autotune run`: after the engine's pick, how much Hindsight should score.

Coordinate descent over the two kinds of knob. The engine search and its race chose the fastest engine
on the whole recorded pool (W). Here, with W's own scores, the result-quality gate (`search.scope`) finds
for each per-candidate token cut the smallest pool cap per budget level that keeps the results; those
scopes race W on the whole pool and Hindsight's defaults, side by side; and from the fastest, the
engine's knobs are refined again on the pool it will really score (a smaller pool can want another
batch size). Whatever is not faster beyond the noise, or fails either gate, is not taken.
"""

from __future__ import annotations

import time

import numpy as np

from autotune.errors import NothingPassedError
from autotune.hindsight.keys import DEFAULT_ENCODING, TOKENIZER_ENCODING, user_caps
from autotune.pipeline.handoffs import Picked, Tuning
from autotune.runtime.engine import EngineConfig
from autotune.search.finalists import Finalist, rerace
from autotune.search.measure import scores_of
from autotune.search.parity import compare, fresh_reference
from autotune.search.refine import Refiner
from autotune.search.scope import (
    TOKEN_GRID,
    Agreement,
    Exploration,
    FrontierPoint,
    Replays,
    ResultGate,
    Scope,
    ScopeOutcome,
    Shaped,
    compare_results,
    explore,
    final_results,
    shape,
)
from autotune.search.stats import NOISY_SPREAD
from autotune.workload.queries import Workload


def encoding_of(user_env: dict[str, str]) -> str:
    return user_env.get(TOKENIZER_ENCODING, "").strip() or DEFAULT_ENCODING


def scope_phase(t: Tuning, picked: Picked, *, gate: ResultGate, tune_pool: bool) -> ScopeOutcome:
    """Choose the scope and, when it changes the pick, put the scoped winner and a fresh side-by-side baseline
    in `picked` (the engine-only pick stays in the outcome, for the attribution)."""
    pool, workload, settings, run = t.pool, t.workload, t.settings, t.prepared
    encoding = encoding_of(run.user_env)
    fixed = Scope(tuple(sorted(user_caps(run.user_env).items())))
    tokens_fixed = run.cap is not None
    replays = Replays(workload)
    base = shape(workload, replays, fixed, encoding)
    reference = fp32_reference(t, fixed, base)
    ref_results = final_results(replays, base, reference)

    scored: dict[tuple[EngineConfig, str], list[np.ndarray]] = {}

    def score_once(config: EngineConfig, wl: Workload) -> list[np.ndarray]:
        """Each form of the workload scored once per configuration (the gate on the pick and the whole pool's
        exploration ask for the same pass)."""
        key = (pool.effective(config), wl.sha256)
        if key not in scored:
            scored[key] = scores_of(pool, config, wl)
        return scored[key]

    def agreement_of(config: EngineConfig, shaped: Shaped) -> Agreement:
        return compare_results(ref_results, final_results(replays, shaped, score_once(config, shaped.workload)),
                               sum(replays.recorded))

    winner = picked.winner
    checked = agreement_of(winner.config, base)
    if not checked.passes(gate):  # int8 or a shorter ONNX_MAX_TOKENS can change what Hindsight returns
        t.stage(f"{winner.config.label()} fails the result gate ({checked.reason(gate)}): the next finalist")
        for f in sorted((f for f in picked.finalists if f.parity is not None and f.parity.passed
                         and f is not winner), key=lambda f: f.latency.p95_ms):
            checked = agreement_of(f.config, base)
            if checked.passes(gate):
                picked.winner = winner = f
                break
        else:
            raise NothingPassedError(f"no finalist passes the result-quality gate ({checked.reason(gate)}): lower "
                               "--min-result-agreement, or look at what int8 or --max-tokens change")
    outcome = ScopeOutcome(fixed, fixed, tokens_fixed, gate, checked, pairs_whole=base.pairs,
                           pairs_scored=base.pairs, recorded_queries=sum(replays.recorded))
    if not tune_pool:
        outcome.note = "pool tuning was turned off (--no-pool-tuning)"
        return outcome
    if not replays.any_recorded:
        outcome.note = ("the workload carries no recorded pool (record it with `autotune record` from a "
                        "Hindsight >= 1.1): the pool and token knobs need one; the gate compared top 10s")
        t.stage(f"pool: not tuned: {outcome.note}")
        return outcome
    missing = len(replays.recorded) - sum(replays.recorded)
    if missing:
        t.stage(f"{missing} of {len(replays.recorded)} queries carry no pool that replays (see `autotune record`'s "
                  "notes): the gate judges them on their top 10, and their level is not capped")
    t.stage(f"the result-quality gate: per query, the share of fp32's whole-pool results still returned "
              f"(floor: mean {gate.min_mean:g}, any query {gate.min_query:g})")
    explored = explore(workload, replays, ref_results, lambda wl: score_once(winner.config, wl), gate,
                       fixed=fixed, encoding=encoding, token_grid=() if tokens_fixed else TOKEN_GRID)
    outcome.points = summary_points(explored, fixed)
    candidates = [c for c in explored.candidates if c.passed and c.scope != fixed]
    if not candidates:
        outcome.note = "no smaller pool or shorter candidate keeps the results above the floor"
        t.stage(f"pool: {outcome.note}")
        return outcome
    ends = t.ends("scope")
    if ends is not None and time.monotonic() >= ends:
        outcome.note = "the --timeout ran out before the scopes that pass the gate could be raced: whole pool kept"
        t.stage(f"pool: {outcome.note}")
        return outcome
    shaped = {c.scope: shape(workload, replays, c.scope, encoding) for c in candidates}
    t.stage(f"racing {len(candidates)} scope(s) that pass the gate against the whole pool, "
              f"{settings.final_rounds} rounds: " + "; ".join(c.scope.label() for c in candidates))
    raced = _race(t, picked, [(winner.config, base), *((winner.config, shaped[c.scope]) for c in candidates)])
    engine_only, scoped = raced[0], raced[1:]
    timed = {fixed: engine_only.latency.p95_ms, **{c.scope: f.latency.p95_ms
                                                   for c, f in zip(candidates, scoped, strict=True)}}
    for point in outcome.points:
        point.p95_ms = timed.get(point.scope, point.p95_ms)
    fastest = min(f.latency.p95_ms for f in scoped)
    tied = [k for k in range(len(scoped)) if scoped[k].latency.p95_ms <= fastest * (1.0 + NOISY_SPREAD)]
    # within the noise of the fastest, the scope that keeps the most results (then the fewest keys) wins
    best = max(tied, key=lambda k: (candidates[k].agreement.mean, candidates[k].agreement.head_mean,
                                    -len(candidates[k].scope.env_keys())))
    if scoped[best].latency.p95_ms * (1.0 + NOISY_SPREAD) > engine_only.latency.p95_ms:
        outcome.note = (f"the fastest scope ({candidates[best].scope.label()}) is within the noise of the whole "
                        "pool: kept the whole pool")
        t.stage(f"pool: {outcome.note}")
        return outcome
    chosen, chosen_shape = candidates[best].scope, shaped[candidates[best].scope]
    config = _refined(t, winner.config, chosen, chosen_shape)
    pick = scoped[best]
    if config != winner.config and agreement_of(config, chosen_shape).passes(gate):
        engine_only, pick = _race(t, picked, [(winner.config, base), (config, chosen_shape)])
    chosen_reference = fp32_reference(t, chosen, chosen_shape)
    pick.parity = compare(chosen_reference, scores_of(pool, pick.config, chosen_shape.workload),
                          settings.tolerance(pick.config.precision))
    outcome.scope, outcome.engine_only, outcome.pairs_scored = chosen, engine_only, chosen_shape.pairs
    outcome.agreement = agreement_of(pick.config, chosen_shape)
    engine_only.parity = winner.parity
    picked.winner = pick
    t.stage(f"pool: {chosen.label()}: {outcome.agreement.summary()}; {chosen_shape.pairs} pairs scored "
              f"instead of {base.pairs}")
    return outcome


def summary_points(explored: Exploration, fixed: Scope) -> list[FrontierPoint]:
    """The frontier worth showing: each token cut on the whole pool, each level's largest cap that failed
    (how close a smaller pool came), and the candidates."""
    whole = [p for p in explored.points if p.scope.caps == fixed.caps]
    closest: dict[str, FrontierPoint] = {}
    for p in explored.points:
        for level, cap in p.scope.caps:
            if fixed.cap(level) is None and not p.passed and (
                    level not in closest or cap >= (closest[level].scope.cap(level) or 0)):
                closest[level] = p
    seen = {p.scope for p in whole}
    extra = [p for p in [*closest.values(), *explored.candidates] if not (p.scope in seen or seen.add(p.scope))]
    return whole + extra


def fp32_reference(t: Tuning, scope: Scope, shaped: Shaped) -> list[np.ndarray]:
    """The fp32 reference for a shaped workload: the run's own, picked per kept pair, when the candidates are
    whole (a pair's score does not depend on its pool); computed afresh (and cached) when they are cut."""
    if scope.tokens is None:
        return [t.reference[i][kept] for i, kept in enumerate(shaped.kept)]
    host = t.prepared.host
    return fresh_reference(t.loaded.bundle, host.has_vnni, host.onnxruntime, shaped.workload,
                           t.loaded.traits.max_tokens, note=t.prepared.stage)


def _race(t: Tuning, picked: Picked, contenders: list[tuple[EngineConfig, Shaped]]) -> list[Finalist]:
    """Each contender on its own pool, interleaved, after Hindsight's defaults on the whole pool (when they were
    raced at all): the baseline in `picked` is replaced by this race's, so every ratio is side by side."""
    configs = [config for config, _ in contenders]
    workloads = [s.workload for _, s in contenders]
    with_baseline = picked.baseline is not None
    if with_baseline:
        configs.insert(0, picked.baseline.config)
        workloads.insert(0, contenders[0][1].workload)
    raced = rerace(t.pool, workloads[0], configs, t.settings.final_rounds, baseline_first=with_baseline,
                   load=t.prepared.traffic, workloads=workloads)
    if with_baseline:
        raced[0].parity = picked.baseline.parity
        picked.baseline = raced.pop(0)
    return raced


def _refined(t: Tuning, start: EngineConfig, scope: Scope, shaped: Shaped) -> EngineConfig:
    """The engine's knobs hill-climbed again on the pool that will really be scored."""
    if t.settings.refine_rounds == 0:
        return start
    reference = fp32_reference(t, scope, shaped)
    refiner = Refiner(t.pool, shaped.workload, t.space, reference, t.settings.tolerance,
                      rounds=t.settings.refine_rounds, deadline=t.ends("scope"),
                      admissible=t.objective.over_budget, load=t.prepared.traffic)
    best = refiner.climb(start).best
    if best != start:
        t.stage(f"refined on the smaller pool: {start.label()} -> {best.label()}")
    return best
