"""The run's time budget: a plan made before anything long is measured, so that `--timeout` bounds the whole run.

A 900 s run once took 2,400 s: the int8 judge alone ran past the whole budget before the search began, the search
got one trial, and the pick was Hindsight's own defaults (issue 51). Here the cost of a pair is measured first on a
small sample (`Costs`, a second or two), each phase's time is estimated from it (`estimate`), and where the sum
passes `--timeout` the phases shrink their work in a fixed order, each cut said: the search's trials (down to a
real search, `MIN_TRIALS`), a trial's repeats, refinement's rounds, the race's rounds, refinement itself, the
race's finalists, then the queries a trial measures (the search's fixed shuffle, cut to a sample). A budget too
small even for that is refused before measuring, naming the time the run needs. Each phase then gets its share
of what is left of the budget when it begins (`Plan.ends`), so one that ran long shrinks the later ones alike
and none is starved.

The estimates are arithmetic on a measured cost, not a promise: a trial's configuration may be slower than the
sampled one, and a loaded host slows everything. The deadlines, not the estimates, keep the promise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from autotune.errors import OptionsError
from autotune.search.space import SearchSettings

MIN_TRIALS = 12  # a search with fewer is no search: TPE needs its start-up trials and some to exploit
MIN_TRIAL_QUERIES = 8  # below this a trial's p95 is one query's luck
PHASES = ("reference", "int8", "search", "refine", "race", "scope", "commit")
REFINE_STEPS, NEIGHBOURS = 2, 6  # a hill climb's usual length, and the neighbours a step measures
SCOPES_RACED = 3  # pool and token scopes that usually pass the gate and race the whole pool
SCOPE_SHARE = 0.6  # a scope's pairs (and tokens) against the whole pool's: a cut pool scores fewer
TIE_FACTOR = 1.25  # near ties run more rounds (twice, for the few within the noise)
LATER_MARGIN = 1.5  # what the search leaves the phases after it, over their estimates (estimates are rough)
COMMIT_FIXED_S = 20.0  # the memory child, the served burst, the tokenizer check, the writes
INT8_SPEED_PASSES = 15  # fp32 and two int8 variants, five rounds each, on about one recall's pairs
INT8_JUDGED_PASSES = 2  # a variant or two judged on the whole workload, in batches


@dataclass(frozen=True)
class Costs:
    """Seconds per pair, measured on a sample before the run measures anything long."""

    pair_s: float  # at a middling configuration: Hindsight's sort, batch 8, every usable core
    reference_pair_s: float  # at the reference's: batch 1, no sort
    pairs: int  # the workload's
    queries: int
    int8: bool  # int8 is in the space: its speed is measured and it may be judged
    concurrency: int = 1  # recalls at once each candidate is timed under
    session_s: float = 0.0  # making one session: every trial, neighbour and finalist makes its own

    @property
    def replay_s(self) -> float:
        """One pass over the whole workload at a good configuration: the cheaper of the two measured (batch 8
        pads short pairs to long ones where lengths vary, and batch 1 pads nothing)."""
        return self.pairs * min(self.pair_s, self.reference_pair_s)


@dataclass(frozen=True)
class Plan:
    """Each phase's estimated seconds, what was cut to fit, and the settings the run goes on with."""

    timeout_s: float | None
    phases: tuple[tuple[str, float], ...]
    settings: SearchSettings  # the user's, with the cuts applied
    trials: int
    trial_queries: int  # queries a trial measures at most (the workload's, unless cut)
    cuts: tuple[str, ...] = ()

    @property
    def total_s(self) -> float:
        return sum(s for _, s in self.phases)

    def estimated(self, phase: str) -> float:
        return dict(self.phases)[phase]

    def ends(self, phase: str, deadline: float | None, now: float) -> float | None:
        """The clock value by which `phase`, beginning `now`, must be done (None without a deadline): its share of
        what is left until the run's `deadline`, by the estimates of it and of the phases after it, so that a
        phase before it that ran long shrinks every later one alike and starves none. Spare time goes to the
        search (more trials), which leaves the phases after it `LATER_MARGIN` times their estimates."""
        if deadline is None:
            return None
        names = [name for name, _ in self.phases]
        later = sum(seconds for _, seconds in self.phases[names.index(phase) + 1:])
        rest = self.estimated(phase) + later
        share = self.estimated(phase) / rest if rest > 0 else 1.0
        end = now + max(0.0, deadline - now) * share
        if phase == "search":
            end = max(end, deadline - LATER_MARGIN * later)
        return end

    def lines(self) -> list[str]:
        total = self.total_s
        shares = ", ".join(f"{name} {seconds / total:.0%}" for name, seconds in self.phases if seconds > 0)
        budget = "no --timeout" if self.timeout_s is None else f"--timeout {self.timeout_s:.0f} s"
        out = [f"plan: about {total:.0f} s ({budget}): {shares}; {self.trials} trials on "
               f"{self.trial_queries} queries each at most"]
        out += [f"plan: to fit the --timeout, {cut}" for cut in self.cuts]
        return out

    def to_dict(self) -> dict[str, object]:
        return {"timeout_s": self.timeout_s, "estimated_s": {n: round(s, 1) for n, s in self.phases},
                "trials": self.trials, "trial_queries": self.trial_queries, "cuts": list(self.cuts)}


def estimate(costs: Costs, settings: SearchSettings, *, trials: int, trial_queries: int) -> dict[str, float]:
    """Each phase's seconds, from the measured cost of a pair (module docstring: arithmetic, not a promise)."""
    per_query = costs.pairs / max(1, costs.queries)
    replay = costs.replay_s * costs.concurrency ** 0.5  # recalls at once queue; their work overlaps in part
    # a trial's configuration lies anywhere between a good one and one as slow as the reference's batch 1
    trial_pair_s = (costs.pair_s + costs.reference_pair_s) / 2
    halving = 0.6 if settings.halving and trial_queries >= 4 else 1.0  # most trials stop at an early rung
    trial = (settings.repeats * halving * trial_queries + 2) * per_query * trial_pair_s + costs.session_s
    sample = min(costs.pairs, 300)
    finalists = settings.finalists + 1  # and the baseline
    return {
        "reference": costs.pairs * costs.reference_pair_s,
        "int8": (INT8_SPEED_PASSES * sample * costs.pair_s + INT8_JUDGED_PASSES * costs.replay_s) if costs.int8
        else 0.0,
        "search": trials * trial,
        "refine": REFINE_STEPS * NEIGHBOURS * (settings.refine_rounds * replay + costs.session_s)
        if settings.refine_rounds else 0.0,
        "race": finalists * ((settings.final_rounds * TIE_FACTOR + 1) * replay + costs.session_s),
        "scope": ((1 + SCOPES_RACED * SCOPE_SHARE) * settings.final_rounds + 2) * replay
        + SCOPES_RACED * costs.session_s,
        "commit": COMMIT_FIXED_S + 2 * costs.replay_s,
    }


def plan_run(costs: Costs, settings: SearchSettings, trials: int) -> Plan:
    """The plan for `trials` trials within `settings.timeout_s`, cut as the module docstring says; an
    OptionsError naming the time needed where even the smallest run does not fit."""
    timeout = settings.timeout_s
    floor = min(trials, MIN_TRIALS)  # a user who asked for fewer trials gets them
    queries = costs.queries
    cuts: list[str] = []

    def phases(s: SearchSettings, n: int, q: int) -> dict[str, float]:
        return estimate(costs, s, trials=n, trial_queries=q)

    def fits(s: SearchSettings, n: int, q: int) -> bool:
        return timeout is None or sum(phases(s, n, q).values()) <= timeout

    def done(s: SearchSettings, n: int, q: int) -> Plan:
        return Plan(timeout, tuple(phases(s, n, q).items()), s, n, q, tuple(cuts))

    if fits(settings, trials, queries):
        return done(settings, trials, queries)
    assert timeout is not None
    steps: list[tuple[str, Callable[[SearchSettings], SearchSettings]]] = []
    if settings.repeats > 1:
        steps.append((f"each trial measures each query once, not {settings.repeats} times (the race repeats)",
                      lambda s: replace(s, repeats=1)))
    if settings.refine_rounds > 1:
        steps.append((f"refinement runs 1 round a step, not {settings.refine_rounds}",
                      lambda s: replace(s, refine_rounds=1)))
    if settings.final_rounds > 2:
        steps.append((f"the race runs 2 rounds, not {settings.final_rounds}", lambda s: replace(s, final_rounds=2)))
    if settings.refine_rounds > 0:
        steps.append(("refinement is off (the search's best is raced as it is)", lambda s: replace(s, refine_rounds=0)))
    if settings.finalists > 2:
        steps.append((f"the race takes 2 finalists besides Hindsight's defaults, not {settings.finalists}",
                      lambda s: replace(s, finalists=2)))
    for said, cut in steps:
        if _trials_within(costs, settings, timeout, queries) >= floor:
            break
        settings = cut(settings)
        cuts.append(said)
    n = min(trials, _trials_within(costs, settings, timeout, queries))
    if n >= floor:
        if n < trials:
            cuts.append(f"the search runs {n} trials, not {trials}")
        return done(settings, n, queries)
    while queries > MIN_TRIAL_QUERIES and _trials_within(costs, settings, timeout, queries) < floor:
        queries = max(MIN_TRIAL_QUERIES, math.floor(queries * 0.75))
    if _trials_within(costs, settings, timeout, queries) < floor:
        needed = sum(phases(settings, floor, min(queries, MIN_TRIAL_QUERIES)).values())
        raise OptionsError(f"--timeout {timeout:.0f} s is too short for this workload on this host: even cut to "
                           f"{floor} trials on {min(queries, costs.queries)} queries each, a run needs about "
                           f"{math.ceil(needed / 10) * 10:.0f} s (a pair costs {costs.pair_s * 1000:.1f} ms here, "
                           f"{costs.pairs} pairs); raise --timeout, or tune on fewer queries")
    cuts.append(f"each trial measures a sample of {queries} of the {costs.queries} queries (the race measures all)")
    n = min(trials, _trials_within(costs, settings, timeout, queries))
    if n < trials:
        cuts.append(f"the search runs {n} trials, not {trials}")
    return done(settings, n, queries)


def _trials_within(costs: Costs, settings: SearchSettings, timeout: float, queries: int) -> int:
    """How many trials fit what the other phases leave of `timeout`."""
    one = estimate(costs, settings, trials=1, trial_queries=queries)
    rest = sum(one.values()) - one["search"]
    return max(0, math.floor((timeout - rest) / one["search"])) if one["search"] > 0 else 10**6
