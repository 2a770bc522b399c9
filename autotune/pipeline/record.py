"""The run's record (`SearchResult`): what the search, the race and the scope found, and how long each phase took.

The pipeline makes it, the profile (`pipeline/profile_doc`) and the summary (`analysis/summary`) say it; the
search that fills most of it knows nothing of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autotune.gates.prechecks import Dropped
from autotune.measure.client_sizing import ServedLoad
from autotune.search.finalists import Finalist
from autotune.search.memory_report import MemoryReport
from autotune.search.refine import RefineResult
from autotune.search.scope_outcome import ScopeOutcome
from autotune.search.study import TrialRecord


@dataclass(frozen=True)
class SearchResult:
    """The run's record: what was searched, raced and scoped, and how long each phase took; the profile says it."""

    study_name: str
    winner: Finalist
    baseline: Finalist | None  # None when Hindsight's defaults would not fit the memory budget
    finalists: list[Finalist]
    trials: list[TrialRecord]
    warnings: list[str] = field(default_factory=list)
    resumed_trials: int = 0
    refined: RefineResult | None = None
    dropped: list[Dropped] = field(default_factory=list)
    memory: MemoryReport | None = None  # what the pick needs when served
    trials_planned: int = 0
    elapsed_s: float = 0.0
    baseline_skipped: str | None = None  # why the baseline was not raced
    candidate_cap: dict[str, Any] | None = None  # the .env's MAX_TOKENS_PER_CANDIDATE, applied to the replay
    phases_s: dict[str, float] = field(default_factory=dict)  # wall time: load, precheck, search, refine, race...
    plan: dict[str, Any] | None = None  # the time plan: each phase's estimate, and what it cut to fit --timeout
    load: ServedLoad | None = None  # the tei sidecar under concurrent recalls, and its client keys
    concurrency: int = 1  # recalls at once every candidate was timed under (queueing in its latency)
    rerun: str | None = None  # on a rerun: whether the committed pick was kept, and why
    scope: ScopeOutcome | None = None  # how much Hindsight scores (pool cap, token cut) and the result gate

    @property
    def measuring_s(self) -> float:
        return sum(v for k, v in self.phases_s.items() if k in ("search", "refine", "race", "scope"))

    @property
    def speedup_p95(self) -> float | None:
        if self.baseline is None:
            return None
        return self.baseline.latency.p95_ms / self.winner.latency.p95_ms

    @property
    def rejected(self) -> list[TrialRecord]:
        return [t for t in self.trials if t.rejected]
