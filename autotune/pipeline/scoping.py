"""The scope phase of `autotune run`: after the engine's pick, how much Hindsight should score.

Coordinate descent over the two kinds of knob. The engine search and its race chose the fastest engine
on the whole recorded pool (W). Here, with W's own scores, the result-quality gate (`gates.scope`) finds
for each per-candidate token cut the smallest pool cap per budget level that keeps the results; those
scopes race W on the whole pool and Hindsight's defaults, side by side; and from the fastest, the
engine's knobs are refined again on the pool it will really score (a smaller pool can want another
batch size). Whatever is not faster beyond the noise, or fails either gate, is not taken.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from autotune.errors import NothingPassedError
from autotune.gates.parity import compare, fresh_reference
from autotune.gates.scope import (
    TOKEN_GRID,
    Agreement,
    Exploration,
    FrontierPoint,
    Replays,
    ResultGate,
    Scope,
    Shaped,
    compare_results,
    explore,
    final_results,
    shape,
)
from autotune.hindsight.keys import DEFAULT_ENCODING, TOKENIZER_ENCODING, user_caps
from autotune.measure.stats import NOISY_SPREAD
from autotune.measure.timing import scores_of
from autotune.pipeline.handoffs import Picked, Scoped, Tuning
from autotune.runtime.engine import EngineConfig
from autotune.search.finalists import Finalist, rerace
from autotune.search.refine import Refiner
from autotune.search.scope_outcome import ScopeOutcome
from autotune.workload.queries import Workload


def encoding_of(user_env: dict[str, str]) -> str:
    return user_env.get(TOKENIZER_ENCODING, "").strip() or DEFAULT_ENCODING


def scope_phase(t: Tuning, picked: Picked, *, gate: ResultGate, tune_pool: bool) -> Scoped:
    """Choose the scope in three steps, explore, race and refine, each handing the next new values: the gated
    pick, the scopes that keep the results, the raced scopes beside a baseline of the same race, and the pick
    refined on its pool. The engine-only pick stays in the outcome, for the attribution."""
    s = _Scoping.of(t)
    picked, checked = _gated(s, picked, gate)
    whole = ScopeOutcome(s.fixed, s.fixed, s.tokens_fixed, gate, checked, pairs_whole=s.base.pairs,
                         pairs_scored=s.base.pairs, recorded_queries=sum(s.replays.recorded))

    def kept_whole(note: str, points: tuple[FrontierPoint, ...] = (), on: Picked = picked) -> Scoped:
        t.stage(f"pool: {note}")
        return Scoped(replace(whole, note=note, points=points), on.winner, on.baseline)

    if not tune_pool:
        return kept_whole("pool tuning was turned off (--no-pool-tuning)")
    if not s.replays.any_recorded:
        return kept_whole("the workload carries no recorded pool (record it with `autotune record` from a "
                          "Hindsight >= 1.1): the pool and token knobs need one; the gate compared top 10s")
    candidates, points = _explore(s, picked.winner, gate)
    if not candidates:
        return kept_whole("no smaller pool or shorter candidate keeps the results above the floor", points)
    ends = t.ends("scope")
    if ends is not None and time.monotonic() >= ends:
        return kept_whole("the --timeout ran out before the scopes that pass the gate could be raced: whole pool "
                          "kept", points)
    raced = _race_scopes(s, picked, candidates)
    timed = raced.timed()
    points = tuple(replace(p, p95_ms=timed.get(p.scope, p.p95_ms)) for p in points)
    best = raced.best()
    if not raced.beats_whole(best):
        return kept_whole(f"the fastest scope ({candidates[best].scope.label()}) is within the noise of the whole "
                          "pool: kept the whole pool", points, raced.picked)
    refined = _refine_scope(s, raced, best, gate)
    agreement = s.agreement_of(refined.pick.config, refined.shaped)
    chosen = candidates[best].scope
    outcome = replace(whole, scope=chosen, pairs_scored=refined.shaped.pairs, agreement=agreement,
                      engine_only=replace(refined.engine_only, parity=picked.winner.parity), points=points)
    t.stage(f"pool: {chosen.label()}: {agreement.summary()}; {refined.shaped.pairs} pairs scored "
            f"instead of {s.base.pairs}")
    return Scoped(outcome, refined.pick, refined.picked.baseline)


@dataclass(frozen=True)
class _Scoping:
    """What every step of the scope phase reads: the replays, the user's fixed scope, the whole pool's shape
    and fp32 results; and each form of the workload scored once per configuration (the gate on the pick and
    the whole pool's exploration ask for the same pass)."""

    t: Tuning
    replays: Replays
    fixed: Scope
    tokens_fixed: bool
    encoding: str
    base: Shaped
    ref_results: list[list[str]]
    scored: dict[tuple[EngineConfig, str], list[np.ndarray]]  # a cache, not a hand-off

    @classmethod
    def of(cls, t: Tuning) -> _Scoping:
        run = t.prepared
        encoding = encoding_of(run.user_env)
        fixed = Scope(tuple(sorted(user_caps(run.user_env).items())))
        replays = Replays(t.workload)
        base = shape(t.workload, replays, fixed, encoding)
        ref_results = final_results(replays, base, fp32_reference(t, fixed, base))
        return cls(t, replays, fixed, run.cap is not None, encoding, base, ref_results, {})

    def shape(self, scope: Scope) -> Shaped:
        return shape(self.t.workload, self.replays, scope, self.encoding)

    def score_once(self, config: EngineConfig, wl: Workload) -> list[np.ndarray]:
        key = (self.t.pool.effective(config), wl.sha256)
        if key not in self.scored:
            self.scored[key] = scores_of(self.t.pool, config, wl)
        return self.scored[key]

    def agreement_of(self, config: EngineConfig, shaped: Shaped) -> Agreement:
        scores = self.score_once(config, shaped.workload)
        return compare_results(self.ref_results, final_results(self.replays, shaped, scores),
                               sum(self.replays.recorded))


def _gated(s: _Scoping, picked: Picked, gate: ResultGate) -> tuple[Picked, Agreement]:
    """The pick, or the fastest finalist after it that passes the result gate on the whole pool (int8 or a
    shorter ONNX_MAX_TOKENS can change what Hindsight returns)."""
    winner = picked.winner
    checked = s.agreement_of(winner.config, s.base)
    if checked.passes(gate):
        return picked, checked
    s.t.stage(f"{winner.config.label()} fails the result gate ({checked.reason(gate)}): the next finalist")
    for f in sorted((f for f in picked.finalists if f.parity is not None and f.parity.passed
                     and f is not winner), key=lambda f: f.latency.p95_ms):
        checked = s.agreement_of(f.config, s.base)
        if checked.passes(gate):
            return replace(picked, winner=f), checked
    raise NothingPassedError(f"no finalist passes the result-quality gate ({checked.reason(gate)}): lower "
                             "--min-result-agreement, or look at what int8 or --max-tokens change")


def _explore(s: _Scoping, winner: Finalist, gate: ResultGate) -> tuple[list[FrontierPoint],
                                                                        tuple[FrontierPoint, ...]]:
    """Step one: the scopes other than the user's that keep the results (`gates.scope.explore`), and the
    frontier worth showing."""
    t = s.t
    missing = len(s.replays.recorded) - sum(s.replays.recorded)
    if missing:
        t.stage(f"{missing} of {len(s.replays.recorded)} queries carry no pool that replays (see `autotune "
                "record`'s notes): the gate judges them on their top 10, and their level is not capped")
    t.stage(f"the result-quality gate: per query, the share of fp32's whole-pool results still returned "
            f"(floor: mean {gate.min_mean:g}, any query {gate.min_query:g})")
    explored = explore(t.workload, s.replays, s.ref_results, lambda wl: s.score_once(winner.config, wl), gate,
                       fixed=s.fixed, encoding=s.encoding, token_grid=() if s.tokens_fixed else TOKEN_GRID)
    candidates = [c for c in explored.candidates if c.passed and c.scope != s.fixed]
    return candidates, tuple(summary_points(explored, s.fixed))


@dataclass(frozen=True)
class _ScopeRace:
    """Step two's result: the engine's pick on the whole pool and on each candidate scope, raced side by side
    after a baseline of the same race (in `picked`)."""

    picked: Picked
    fixed: Scope
    engine_only: Finalist
    candidates: list[FrontierPoint]
    shaped: list[Shaped]  # each candidate's form of the workload, as it was raced
    scoped: list[Finalist]

    def timed(self) -> dict[Scope, float]:
        return {self.fixed: self.engine_only.latency.p95_ms,
                **{c.scope: f.latency.p95_ms for c, f in zip(self.candidates, self.scoped, strict=True)}}

    def best(self) -> int:
        """Within the noise of the fastest, the scope that keeps the most results (then the fewest keys)."""
        fastest = min(f.latency.p95_ms for f in self.scoped)
        tied = [k for k, f in enumerate(self.scoped) if f.latency.p95_ms <= fastest * (1.0 + NOISY_SPREAD)]
        return max(tied, key=lambda k: (self.candidates[k].agreement.mean, self.candidates[k].agreement.head_mean,
                                        -len(self.candidates[k].scope.env_keys())))

    def beats_whole(self, k: int) -> bool:
        return self.scoped[k].latency.p95_ms * (1.0 + NOISY_SPREAD) <= self.engine_only.latency.p95_ms


def _race_scopes(s: _Scoping, picked: Picked, candidates: list[FrontierPoint]) -> _ScopeRace:
    """Step two: the pick on each scope that passes the gate, raced against itself on the whole pool."""
    t, winner = s.t, picked.winner.config
    t.stage(f"racing {len(candidates)} scope(s) that pass the gate against the whole pool, "
            f"{t.settings.final_rounds} rounds: " + "; ".join(c.scope.label() for c in candidates))
    shaped = [s.shape(c.scope) for c in candidates]
    picked, raced = _race(t, picked, [(winner, s.base), *((winner, each) for each in shaped)])
    return _ScopeRace(picked, s.fixed, raced[0], candidates, shaped, raced[1:])


@dataclass(frozen=True)
class _Refined:
    pick: Finalist  # with its parity on the pool it will score
    engine_only: Finalist
    picked: Picked  # the baseline of the race `pick` and `engine_only` ran in
    shaped: Shaped


def _refine_scope(s: _Scoping, raced: _ScopeRace, k: int, gate: ResultGate) -> _Refined:
    """Step three: the engine's knobs refined on the chosen pool, raced again when that moved them, and the
    pick's parity on that pool."""
    t = s.t
    scope, shaped = raced.candidates[k].scope, raced.shaped[k]
    start = raced.picked.winner.config
    config = _refined(t, start, scope, shaped)
    picked, engine_only, pick = raced.picked, raced.engine_only, raced.scoped[k]
    if config != start and s.agreement_of(config, shaped).passes(gate):
        picked, (engine_only, pick) = _race(t, picked, [(start, s.base), (config, shaped)])
    reference = fp32_reference(t, scope, shaped)
    parity = compare(reference, scores_of(t.pool, pick.config, shaped.workload),
                     t.settings.tolerance(pick.config.precision))
    return _Refined(replace(pick, parity=parity), engine_only, picked, shaped)


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
    extra = []
    for p in [*closest.values(), *explored.candidates]:
        if p.scope not in seen:
            seen.add(p.scope)
            extra.append(p)
    return whole + extra


def fp32_reference(t: Tuning, scope: Scope, shaped: Shaped) -> list[np.ndarray]:
    """The fp32 reference for a shaped workload: the run's own, picked per kept pair, when the candidates are
    whole (a pair's score does not depend on its pool); computed afresh (and cached) when they are cut."""
    if scope.tokens is None:
        return [t.reference[i][kept] for i, kept in enumerate(shaped.kept)]
    host = t.prepared.host
    return fresh_reference(t.loaded.bundle, host.has_vnni, host.onnxruntime, shaped.workload,
                           t.loaded.traits.max_tokens, note=t.prepared.stage)


def _race(t: Tuning, picked: Picked, contenders: list[tuple[EngineConfig, Shaped]]
          ) -> tuple[Picked, list[Finalist]]:
    """Each contender on its own pool, interleaved, after Hindsight's defaults on the whole pool (when they were
    raced at all): the Picked handed back holds this race's baseline, so every ratio is side by side."""
    configs = [config for config, _ in contenders]
    workloads = [s.workload for _, s in contenders]
    baseline = picked.baseline
    if baseline is not None:
        configs.insert(0, baseline.config)
        workloads.insert(0, contenders[0][1].workload)
    raced = rerace(t.pool, workloads[0], configs, t.settings.final_rounds, baseline_first=baseline is not None,
                   load=t.prepared.traffic, workloads=workloads)
    if baseline is None:
        return picked, raced
    return replace(picked, baseline=replace(raced[0], parity=baseline.parity)), raced[1:]


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
