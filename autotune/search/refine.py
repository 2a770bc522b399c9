"""Hill-climbing from the search's best: a pick no single knob can beat.

TPE samples; it does not check that its best is a local optimum. So from the best feasible
trial, each step measures every one-knob neighbour interleaved with the incumbent (A B C A B
C, rotating), and moves to the best neighbour that wins beyond the noise the step itself
measured (in every round, and by more than the rounds' spread or 3%) and passes
parity. A neighbour that loses a round can no longer win every round, so it is not measured
again in that step: at a local optimum the later rounds time the incumbent alone, or nothing.
It stops at a local optimum, after `max_steps`, or at the deadline. A configuration measured
once is never measured again.

Two rounds are enough to move on a clear win, not to settle a near tie. A neighbour counts as
slower (`beaten`) only by more than the step's spread and at least 10% (the spread at which
pyperf calls repeats noisy): a step that stops after one round has measured no spread at all,
and on a shared host one round of the same configuration varies by 5-25%. The last step's
neighbours that are not beaten (`runners_up`) go on to the final re-race, which has more rounds,
rather than being dropped on a round lost by chance; they cost no extra time there, since the
re-race has a fixed number of places.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from autotune.gates.parity import Tolerance, compare
from autotune.measure.stats import NOISY_SPREAD, p95_ms, percentile, relative_spread
from autotune.measure.timing import Load, interleaved_passes, replay
from autotune.runtime.engine import EngineConfig, ScoringPool
from autotune.runtime.space import SearchSpace
from autotune.workload.queries import Workload

MIN_GAIN = 0.03  # a neighbour must be at least this much faster, even when the rounds agree closely


@dataclass(frozen=True)
class Neighbour:
    config: EngineConfig
    p95_ms: float | None  # None: not run (see `skipped`)
    skipped: str | None = None
    rounds: int = 0  # rounds it ran: fewer than the incumbent's once it lost one
    beaten: bool = False  # slower than the incumbent side by side, by more than the noise (at least 10%)

    def to_dict(self) -> dict[str, Any]:
        return {**self.config.to_dict(), "p95_ms": None if self.p95_ms is None else round(self.p95_ms, 3),
                "skipped": self.skipped, "rounds": self.rounds}


@dataclass(frozen=True)
class RefineStep:
    incumbent: EngineConfig
    incumbent_p95_ms: float
    threshold: float  # the gain a neighbour had to show: max(MIN_GAIN, the step's measured spread)
    neighbours: list[Neighbour]
    moved_to: EngineConfig | None

    def to_dict(self) -> dict[str, Any]:
        return {"incumbent": self.incumbent.to_dict(), "incumbent_p95_ms": round(self.incumbent_p95_ms, 3),
                "threshold": round(self.threshold, 4), "neighbours": [n.to_dict() for n in self.neighbours],
                "moved_to": None if self.moved_to is None else self.moved_to.to_dict()}


@dataclass(frozen=True)
class RefineResult:
    start: EngineConfig
    best: EngineConfig
    steps: list[RefineStep] = field(default_factory=list)
    stopped: str = "local optimum"

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start.to_dict(), "best": self.best.to_dict(), "stopped": self.stopped,
                "runners_up": [c.to_dict() for c in self.runners_up()], "steps": [s.to_dict() for s in self.steps]}

    def beaten(self) -> list[EngineConfig]:
        """Neighbours that were slower than their step's incumbent beyond the noise: the re-race skips them."""
        return [n.config for step in self.steps for n in step.neighbours if n.beaten]

    def runners_up(self) -> list[EngineConfig]:
        """The last step's neighbours within its noise of the pick (parity not yet checked), closest first:
        the re-race settles them against the pick over more rounds."""
        if not self.steps or self.steps[-1].moved_to is not None:
            return []
        close = [n for n in self.steps[-1].neighbours if n.p95_ms is not None and n.skipped is None and not n.beaten]
        return [n.config for n in sorted(close, key=lambda n: n.p95_ms or 0.0)]


@dataclass
class Refiner:
    """What a step needs besides the incumbent: where to measure, what is allowed, and when to stop."""

    pool: ScoringPool
    workload: Workload
    space: SearchSpace
    reference: list[np.ndarray]
    tolerance: Callable[[str], Tolerance]
    rounds: int = 2
    max_steps: int = 6
    deadline: float | None = None  # time.monotonic() value
    admissible: Callable[[EngineConfig], str | None] = lambda _config: None  # a reason to skip, or None
    load: Load = field(default_factory=Load)  # how each contender is driven while timed
    # the contenders whose sessions fit together (the incumbent always), and those left out
    fit_together: Callable[[list[EngineConfig]], tuple[list[EngineConfig], list[EngineConfig]]] = (
        lambda configs: (configs, []))

    def climb(self, start: EngineConfig) -> RefineResult:
        steps: list[RefineStep] = []
        seen = {self.pool.effective(start)}
        incumbent, stopped = start, "local optimum"
        while len(steps) < self.max_steps:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                stopped = "time budget"
                break
            step = self._step(incumbent, seen)
            steps.append(step)
            if step.moved_to is None:
                break
            incumbent = step.moved_to
        else:
            stopped = f"{self.max_steps} steps"
        return RefineResult(start, incumbent, steps, stopped)

    def _step(self, incumbent: EngineConfig, seen: set[EngineConfig]) -> RefineStep:
        skipped: list[Neighbour] = []
        to_run: list[EngineConfig] = []
        for config in self.space.neighbours(incumbent):
            key = self.pool.effective(config)
            if key in seen:
                continue
            seen.add(key)
            reason = self.admissible(config)
            if reason is not None:
                skipped.append(Neighbour(config, None, reason))
            else:
                to_run.append(config)
        configs, crowded = self.fit_together([incumbent, *to_run])
        skipped += [Neighbour(c, None, "over budget beside the others") for c in crowded]
        if len(configs) < 2:
            return RefineStep(incumbent, float("nan"), MIN_GAIN, skipped, None)
        to_run = configs[1:]
        passes = interleaved_passes([self.load.timer(self.pool, c) for c in configs], self.workload.queries,
                                    self.rounds, still_in=_round_winners)
        p95 = [p95_ms(p) for p in passes]
        rounds = [[percentile(r, 95) for r in p] for p in passes]
        spreads = [relative_spread(r) for r in rounds]
        threshold = max(MIN_GAIN, spreads[0])
        tie = max(NOISY_SPREAD, threshold)  # losing by less is no evidence: a step's one or two rounds vary that much
        measured = {c: Neighbour(c, v, rounds=len(r), beaten=v > _p95_over(passes[0], len(r)) * (1.0 + tie))
                    for c, v, r in zip(to_run, p95[1:], rounds[1:], strict=True)}
        moved, failed = None, set()
        ranked = sorted(zip(to_run, p95[1:], spreads[1:], rounds[1:], strict=True), key=lambda item: item[1])
        for config, value, spread, own_rounds in ranked:
            if value >= p95[0] * (1.0 - max(threshold, spread)):
                break
            if len(own_rounds) < len(rounds[0]) or not all(
                    mine < theirs for mine, theirs in zip(own_rounds, rounds[0], strict=True)):
                continue  # faster overall but not in every round: not beyond the noise
            if self._passes_parity(config):
                moved = config
                break
            failed.add(config)
        neighbours = [replace(n, skipped="failed parity") if c in failed else n for c, n in measured.items()]
        return RefineStep(incumbent, p95[0], threshold, [*neighbours, *skipped], moved)

    def _passes_parity(self, config: EngineConfig) -> bool:
        scores = replay(self.pool.engine(config), self.workload.queries, keep_scores=True).scores
        return compare(self.reference, scores, self.tolerance(config.precision)).passed


def _p95_over(passes: list[list[float]], rounds: int) -> float:
    """The p95 in ms over the first `rounds` passes: the incumbent over the rounds a neighbour shared with it."""
    return p95_ms(passes[:rounds])


def _round_winners(passes: list[list[list[float]]]) -> list[int]:
    """After a round: the incumbent (contender 0) and the neighbours that beat it in every round so far;
    nobody, when no neighbour is left to compare it with."""
    done = len(passes[0])
    last = [percentile(p[-1], 95) if len(p) == done else math.inf for p in passes]  # inf: not in this round
    winners = [i for i in range(1, len(passes)) if last[i] < last[0]]
    return [0, *winners] if winners else []


def neighbours_summary(result: RefineResult, places: int) -> Sequence[str]:
    """One line per step, for the run's output; of the runners-up, only the `places` the race has for them
    are named as raced again, and the rest are counted as not raced."""
    lines = []
    for i, step in enumerate(result.steps, start=1):
        ran = [n for n in step.neighbours if n.p95_ms is not None]
        move = f"moved to {step.moved_to.label()}" if step.moved_to else "no neighbour won beyond the noise"
        lines.append(f"step {i}: {len(ran)} neighbours of {step.incumbent.label()} measured; {move}")
    close = result.runners_up()
    raced, left = close[:max(places, 0)], close[max(places, 0):]
    if raced:
        lines.append(f"within the noise of the pick, raced again: {', '.join(c.label() for c in raced)}")
    if left:
        lines.append(f"within the noise of the pick but not raced (the race has {max(places, 0)} place(s) for "
                     f"runners-up): {len(left)} more")
    return lines
