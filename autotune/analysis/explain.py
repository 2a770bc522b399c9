"""`autotune explain`: which knob bought what, one variable at a time.

Waterfall: from the baseline, apply the winner's knobs in the order batch size -> threads ->
length sort -> precision -> arena -> graph -> spinning, each step measured interleaved with the one before. Then
leave-one-out: revert each knob alone from the winner, measured interleaved with the winner.
When the profile chose how much Hindsight scores, the waterfall goes on from the winner on the whole
pool to its pool cap, then its token cut: the gain splits into cheaper pairs (the engine's knobs) and
fewer, shorter pairs (the scope).
A knob whose change runs the same configuration on this host (the target's default threads
resolve to the very count the winner names) is listed as unchanged, not timed: timing one
session against itself measures only the noise, and can call it a difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autotune.errors import OptionsError
from autotune.gates.scope import profile_form, scoring_on
from autotune.host import HostInfo
from autotune.measure.stats import p95_ms, percentile, relative_spread
from autotune.measure.timing import interleaved
from autotune.outputs.profile import profile_config, profile_max_tokens, profile_target, write_profile
from autotune.runtime.engine import EngineConfig, ScoringPool
from autotune.runtime.targets import SpaceLimits, get_target
from autotune.workload.queries import Workload

SCOPE_STEPS = ("pool cap", "token cut")  # the waterfall's last steps: fewer pairs, then shorter ones
KNOBS = ("batch_size", "intra_op_threads", "length_sort", "precision", "mem_arena", "graph", "spinning", "workers")


# below this a difference is never called real, however the rounds agree: a race of one configuration
# against itself (A/A) moved it by 2-11% on this project's shared 2-core hosts (docs/benchmarks.md)
NOISE_FLOOR = 0.05


@dataclass
class Step:
    knob: str
    config: EngineConfig
    p95_ms: float
    before_p95_ms: float
    round_ratios: list[float] = field(default_factory=list)  # before / after, one per interleaved round

    @property
    def ratio(self) -> float:
        """> 1 means this step made things faster."""
        return self.before_p95_ms / self.p95_ms

    @property
    def beyond_noise(self) -> bool:
        """Every round agrees on the direction, and the difference passes both the noise floor and the
        rounds' own spread (a step whose rounds scatter more than it moves is not told from noise)."""
        r = self.round_ratios
        same_side = bool(r) and (all(x > 1 for x in r) or all(x < 1 for x in r))
        return (len(r) >= 2 and same_side
                and abs(self.ratio - 1.0) > max(NOISE_FLOOR, relative_spread(r)))


@dataclass
class ExplainResult:
    baseline_p95_ms: float
    steps: list[Step]
    leave_one_out: list[Step]
    unchanged: list[str] = field(default_factory=list)  # knobs whose change runs the same configuration here

    @property
    def cumulative(self) -> list[float]:
        out, acc = [], 1.0
        for s in self.steps:
            acc *= s.ratio
            out.append(acc)
        return out

    def gain(self, scope: bool) -> float:
        """The product of the engine's steps (cheaper pairs), or of the scope's (fewer, shorter pairs)."""
        acc = 1.0
        for s in self.steps:
            if (s.knob in SCOPE_STEPS) == scope:
                acc *= s.ratio
        return acc

    def most_important(self) -> str | None:
        return max(self.steps, key=lambda s: s.ratio).knob if self.steps else None

    def to_dict(self) -> dict[str, Any]:
        def step(s: Step) -> dict[str, Any]:
            return {"knob": s.knob, **s.config.to_dict(), "p95_ms": round(s.p95_ms, 3),
                    "before_p95_ms": round(s.before_p95_ms, 3), "ratio": round(s.ratio, 4),
                    "round_ratios": [round(x, 4) for x in s.round_ratios], "beyond_noise": s.beyond_noise}

        return {"baseline_p95_ms": round(self.baseline_p95_ms, 3), "waterfall": [step(s) for s in self.steps],
                "cumulative": [round(c, 4) for c in self.cumulative],
                "leave_one_out": [step(s) for s in self.leave_one_out], "unchanged": self.unchanged,
                "most_important": self.most_important(),
                "cheaper_pairs": round(self.gain(scope=False), 4), "fewer_pairs": round(self.gain(scope=True), 4)}


def _pair(pool: ScoringPool, workload: Workload, knob: str, before: EngineConfig, after: EngineConfig,
          rounds: int, forms: tuple[Workload | None, Workload | None] = (None, None)) -> Step:
    """`before` and `after` interleaved; the step from one to the other, with its per-round ratios. `forms`
    gives either side its own form of each query (a smaller pool, shorter candidates)."""
    scorers = [scoring_on(pool.engine(config).score, workload, form)
               for config, form in zip((before, after), forms, strict=True)]
    passes = interleaved(scorers, workload.queries, rounds)
    p95_before, p95_after = (p95_ms(p) for p in passes)
    per_round = [percentile(b, 95) / percentile(a, 95) for b, a in zip(passes[0], passes[1], strict=True)]
    return Step(knob, after, p95_after, p95_before, per_round)


def explain(pool: ScoringPool, workload: Workload, baseline: EngineConfig, winner: EngineConfig,
            rounds: int, scopes: Sequence[tuple[str, Workload]] = ()) -> ExplainResult:
    steps: list[Step] = []
    unchanged: list[str] = []
    current = baseline
    baseline_p95 = None
    for knob in KNOBS:
        if getattr(winner, knob) == getattr(current, knob):
            continue
        nxt = replace(current, **{knob: getattr(winner, knob)})
        if pool.effective(nxt) == pool.effective(current):
            unchanged.append(knob)
            current = nxt
            continue
        step = _pair(pool, workload, knob, current, nxt, rounds)
        baseline_p95 = step.before_p95_ms if baseline_p95 is None else baseline_p95
        steps.append(step)
        current = nxt
    form: Workload | None = None
    for knob, shaped in scopes:  # the winner's engine throughout: only what is scored changes
        step = _pair(pool, workload, knob, winner, winner, rounds, (form, shaped))
        baseline_p95 = step.before_p95_ms if baseline_p95 is None else baseline_p95
        steps.append(step)
        form = shaped
    loo: list[Step] = []
    for knob in KNOBS:
        if getattr(winner, knob) == getattr(baseline, knob):
            continue
        reverted = replace(winner, **{knob: getattr(baseline, knob)})
        if pool.effective(reverted) == pool.effective(winner):
            unchanged += [] if knob in unchanged else [knob]
            continue
        loo.append(_pair(pool, workload, knob, winner, reverted, rounds))
    if baseline_p95 is None:  # the winner is the baseline, as it runs here
        baseline_p95 = _pair(pool, workload, "none", baseline, baseline, rounds).before_p95_ms
    return ExplainResult(baseline_p95, steps, loo, unchanged)


def explain_profile(profile: dict[str, Any], workload: Workload, host: HostInfo, *, rounds: int,
                    force: bool = False, model_dir: Path | None = None) -> ExplainResult:
    """The waterfall for a saved profile, on this host (refused on another unless forced)."""
    from autotune.analysis.bench import ensure_same_host, model_ref

    if rounds < 1:
        raise OptionsError(f"--rounds must be at least 1, got {rounds}")
    ensure_same_host(profile, host, force)
    ref = model_ref(profile, model_dir)
    target = get_target(profile_target(profile))
    bundle = target.load_model(ref)
    pool = target.pool(bundle, has_vnni=host.has_vnni, usable_cores=host.cores.usable,
                       max_tokens=profile_max_tokens(profile))
    winner = profile_config(profile)
    space = target.space(SpaceLimits(usable_cores=host.cores.usable, max_candidates=workload.max_candidates))
    # Hindsight's defaults as they run on this workload, as `run` names them: batch 32 is capped at the most
    # candidates any query has (a larger batch is the same batch)
    return explain(pool, workload, target.baseline(space), winner, rounds, scope_steps(profile, workload))


def scope_steps(profile: dict[str, Any], workload: Workload) -> list[tuple[str, Workload]]:
    """The profile's pool cap, then its token cut, each as the workload Hindsight would hand over."""
    capped, cut = profile_form(profile, workload, tokens=False), profile_form(profile, workload)
    steps = [] if capped is None else [("pool cap", capped)]
    if cut is not None and cut is not capped and (profile.get("scope") or {}).get("chosen", {}).get(
            "max_tokens_per_candidate"):
        steps.append(("token cut", cut))
    return steps


def save_explain(path: Path, profile: dict[str, Any], result: ExplainResult, workload: Workload) -> None:
    """Keep the waterfall in the profile, so `autotune report` can draw it."""
    write_profile(path.parent, path.stem, {**profile, "explain": {**result.to_dict(),
                                                                   "workload_sha256": workload.sha256}})
