"""`autotune explain`: which knob bought what, one variable at a time.

Waterfall: from the baseline, apply the winner's knobs in the order batch size -> threads ->
length sort -> precision -> arena -> graph -> spinning, each step measured interleaved with the one before. Then
leave-one-out: revert each knob alone from the winner, measured interleaved with the winner.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autotune.errors import OptionsError
from autotune.host import HostInfo
from autotune.outputs.profile import profile_config, profile_max_tokens, profile_target, write_profile
from autotune.runtime.engine import BASELINE, EngineConfig, ScoringPool
from autotune.runtime.model import resolve_model
from autotune.runtime.targets import SpaceLimits, get_target
from autotune.search.measure import interleaved
from autotune.search.stats import per_query_medians, percentile
from autotune.workload.queries import Workload

KNOBS = ("batch_size", "intra_op_threads", "length_sort", "precision", "mem_arena", "graph", "spinning")


@dataclass
class Step:
    knob: str
    config: EngineConfig
    p95_ms: float
    before_p95_ms: float

    @property
    def ratio(self) -> float:
        """> 1 means this step made things faster."""
        return self.before_p95_ms / self.p95_ms


@dataclass
class ExplainResult:
    baseline_p95_ms: float
    steps: list[Step]
    leave_one_out: list[Step]

    @property
    def cumulative(self) -> list[float]:
        out, acc = [], 1.0
        for s in self.steps:
            acc *= s.ratio
            out.append(acc)
        return out

    def most_important(self) -> str | None:
        return max(self.steps, key=lambda s: s.ratio).knob if self.steps else None

    def to_dict(self) -> dict[str, Any]:
        def step(s: Step) -> dict[str, Any]:
            return {"knob": s.knob, **s.config.to_dict(), "p95_ms": round(s.p95_ms, 3),
                    "before_p95_ms": round(s.before_p95_ms, 3), "ratio": round(s.ratio, 4)}

        return {"baseline_p95_ms": round(self.baseline_p95_ms, 3), "waterfall": [step(s) for s in self.steps],
                "cumulative": [round(c, 4) for c in self.cumulative],
                "leave_one_out": [step(s) for s in self.leave_one_out], "most_important": self.most_important()}


def _pair_p95(pool: ScoringPool, workload: Workload, a: EngineConfig, b: EngineConfig, rounds: int
              ) -> tuple[float, float]:
    passes = interleaved([pool.engine(a).score, pool.engine(b).score], workload.queries, rounds)
    return tuple(percentile(per_query_medians(p), 95) * 1000.0 for p in passes)  # type: ignore[return-value]


def explain(pool: ScoringPool, workload: Workload, baseline: EngineConfig, winner: EngineConfig,
            rounds: int) -> ExplainResult:
    steps: list[Step] = []
    current = baseline
    baseline_p95 = None
    for knob in KNOBS:
        if getattr(winner, knob) == getattr(current, knob):
            continue
        nxt = replace(current, **{knob: getattr(winner, knob)})
        before, after = _pair_p95(pool, workload, current, nxt, rounds)
        baseline_p95 = before if baseline_p95 is None else baseline_p95
        steps.append(Step(knob, nxt, after, before))
        current = nxt
    loo: list[Step] = []
    for knob in KNOBS:
        if getattr(winner, knob) == getattr(baseline, knob):
            continue
        reverted = replace(winner, **{knob: getattr(baseline, knob)})
        win_p95, rev_p95 = _pair_p95(pool, workload, winner, reverted, rounds)
        loo.append(Step(knob, reverted, rev_p95, win_p95))
    if baseline_p95 is None:  # the winner is the baseline
        baseline_p95 = _pair_p95(pool, workload, baseline, baseline, rounds)[0]
    return ExplainResult(baseline_p95, steps, loo)


def explain_profile(profile: dict[str, Any], workload: Workload, host: HostInfo, *, rounds: int,
                    force: bool = False, model_dir: Path | None = None) -> ExplainResult:
    """The waterfall for a saved profile, on this host (refused on another unless forced)."""
    from autotune.analysis.bench import ensure_same_host, model_ref

    if rounds < 1:
        raise OptionsError(f"--rounds must be at least 1, got {rounds}")
    ensure_same_host(profile, host, force)
    ref = model_ref(profile, model_dir)
    target = get_target(profile_target(profile))
    bundle = resolve_model(None if ref == "default" else Path(ref))
    pool = target.pool(bundle, has_vnni=host.has_vnni, usable_cores=host.cores.usable,
                       max_tokens=profile_max_tokens(profile))
    winner = profile_config(profile)
    space = target.space(SpaceLimits(usable_cores=host.cores.usable, max_candidates=workload.max_candidates))
    baseline = replace(target.baseline(space), batch_size=BASELINE.batch_size)
    return explain(pool, workload, baseline, winner, rounds)


def save_explain(path: Path, profile: dict[str, Any], result: ExplainResult, workload: Workload) -> None:
    """Keep the waterfall in the profile, so `autotune report` can draw it."""
    write_profile(path.parent, path.stem, {**profile, "explain": {**result.to_dict(),
                                                                   "workload_sha256": workload.sha256}})
