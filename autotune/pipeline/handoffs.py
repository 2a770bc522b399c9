"""What each phase of `autotune run` hands the next: typed values, each whole when it is made.

prepare -> `Prepared`; load -> `Loaded`; precheck -> `Checked` (the three together: `Tuning`, what every
later phase reads); search -> `Searched`; race -> `Raced` (the finalists, parity again, the pick);
scope -> `Scoped`; judge -> `Judged`; commit -> `RunOutcome`. A phase never fills a field of another's
value, so each can be called alone with values a test builds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna

from autotune.gates.int8_judge import Int8Verdict
from autotune.gates.prechecks import Dropped
from autotune.gates.selfcheck import SelfCheck
from autotune.host import HostInfo
from autotune.measure.noise import Conditions
from autotune.measure.timing import Load
from autotune.pipeline.budget import Plan
from autotune.pipeline.options import RunOptions
from autotune.pipeline.record import SearchResult
from autotune.runtime.engine import EngineTraits, ScoringPool
from autotune.runtime.model import ModelBundle
from autotune.runtime.space import SearchSpace
from autotune.runtime.targets import Target
from autotune.search.finalists import Finalist
from autotune.search.objective import Objective
from autotune.search.scope_outcome import ScopeOutcome
from autotune.search.space import SearchSettings
from autotune.workload.candidate_cap import CandidateCap
from autotune.workload.queries import Workload


@dataclass(frozen=True)
class Prepared:
    """Everything known before a model loads: the inputs, the host, and the run's clock."""

    opts: RunOptions
    target: Target
    host: HostInfo
    workload: Workload  # as Hindsight would see it (cut to MAX_TOKENS_PER_CANDIDATE where the .env sets it)
    source_sha256: str  # the workload file's hash, before any cut
    user_env: dict[str, str]
    cap: CandidateCap | None
    traffic: Load
    space: SearchSpace  # the target's space before the pre-checks narrow it
    stage: Callable[[str], None]
    started: float
    deadline: float | None
    committed: dict[str, Any] | None  # the profile an earlier run wrote at this path (not with --fresh)
    phase: Callable[[str, float | None], None] = lambda _name, _seconds: None  # a phase begins, its estimate

    @property
    def settings(self) -> SearchSettings:
        return self.opts.settings


@dataclass(frozen=True)
class Loaded:
    """The model, the pool that scores it, the fp32 reference, the recording's self-check, and the time plan
    made from what a pair costs here (`budget.Plan`: each phase's share of --timeout, and what it cut)."""

    bundle: ModelBundle
    traits: EngineTraits
    pool: ScoringPool
    reference: list[np.ndarray]
    recording: SelfCheck | None
    plan: Plan | None = None

    def ends(self, phase: str, deadline: float | None) -> float | None:
        """The clock value by which `phase`, beginning now, must be done (None without a --timeout)."""
        return None if self.plan is None else self.plan.ends(phase, deadline, time.monotonic())


@dataclass(frozen=True)
class Checked:
    """What the pre-checks left: the narrowed space, what left it and why, int8's verdict, the objective."""

    space: SearchSpace
    dropped: list[Dropped]
    int8: Int8Verdict | None  # each int8 variant's results against fp32, and the one the search runs
    int8_considered: bool
    objective: Objective  # holds the run's one memory budget

    @property
    def budget_mb(self) -> float:
        """The memory budget the pick is held to (a race may be given more, for Hindsight's defaults)."""
        budget = self.objective.memory_budget_mb
        assert budget is not None, "a run's objective always has a budget"
        return budget


@dataclass(frozen=True)
class Tuning:
    """The three hand-offs before the search, which every later phase reads."""

    prepared: Prepared
    loaded: Loaded
    checked: Checked

    @property
    def settings(self) -> SearchSettings:
        """The user's settings, with what the time plan cut to fit the --timeout."""
        return self.loaded.plan.settings if self.loaded.plan is not None else self.prepared.settings

    def ends(self, phase: str) -> float | None:
        return self.loaded.ends(phase, self.prepared.deadline)

    def begin(self, phase: str) -> None:
        """Say that `phase` begins, with the plan's estimate of it (a progress bar's ETA)."""
        plan = self.loaded.plan
        self.prepared.phase(phase, None if plan is None else plan.estimated(phase))

    @property
    def stage(self) -> Callable[[str], None]:
        return self.prepared.stage

    @property
    def pool(self) -> ScoringPool:
        return self.loaded.pool

    @property
    def workload(self) -> Workload:
        return self.prepared.workload

    @property
    def reference(self) -> list[np.ndarray]:
        return self.loaded.reference

    @property
    def space(self) -> SearchSpace:
        return self.checked.space

    @property
    def objective(self) -> Objective:
        return self.checked.objective


@dataclass(frozen=True)
class Searched:
    study: optuna.Study
    study_name: str
    trials: int
    resumed: int


@dataclass(frozen=True)
class Picked:
    """The pick as the scope phase works on it: the winner on its pool, the baseline of the same race."""

    winner: Finalist
    baseline: Finalist | None
    finalists: list[Finalist]


@dataclass(frozen=True)
class Raced:
    """The finalists re-measured side by side and checked again for parity; the pick among those that pass."""

    finalists: list[Finalist]
    winner: Finalist
    noise: list[str]
    baseline_skipped: str | None  # why Hindsight's defaults were not raced, or None
    rerun: str | None  # a rerun's verdict on the committed pick

    @property
    def passing(self) -> list[Finalist]:
        """The finalists that passed parity again."""
        return [f for f in self.finalists if f.parity is not None and f.parity.passed]


@dataclass(frozen=True)
class Scoped:
    """How much Hindsight scores, and the pick and baseline on that pool."""

    outcome: ScopeOutcome
    winner: Finalist
    baseline: Finalist | None


@dataclass(frozen=True)
class Judged:
    """The run's result, the conditions it was measured under, and int8's scatter against fp32."""

    result: SearchResult
    conditions: Conditions
    int8_sample: dict[str, Any] | None
