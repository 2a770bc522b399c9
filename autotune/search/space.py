"""The settings of one search: how many trials, how hard to measure, the parity bounds.

What may be tried is `runtime.space.SearchSpace`, which the targets define."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.errors import SettingError
from autotune.gates.parity import FP32_TOLERANCE, INT8_TOLERANCE, Tolerance
from autotune.runtime.space import SearchSpace


@dataclass(frozen=True)
class SearchSettings:
    trials: int | None = None  # None: the space's default_trials()
    timeout_s: float | None = None  # wall-clock budget for the whole run: search, refinement and re-race
    seed: int = 0
    repeats: int = 3
    finalists: int = 3  # besides the baseline: the refined pick and its two closest runners-up, as a rule
    final_rounds: int = 3
    refine_rounds: int = 2  # interleaved rounds per hill-climbing step; 0 turns refinement off
    halving: bool = True  # successive halving over the workload's queries
    max_memory_mb: float | None = None  # None: a fraction of the memory available when the run starts
    fp32_tolerance: Tolerance = FP32_TOLERANCE
    int8_tolerance: Tolerance = INT8_TOLERANCE

    def __post_init__(self) -> None:
        """Bounds, by field name (`commands/run.py` names the flags)."""
        for name in ("repeats", "final_rounds"):
            if getattr(self, name) < 1:
                raise SettingError(name, f"must be at least 1, got {getattr(self, name)}")
        if self.trials is not None and self.trials < 1:
            raise SettingError("trials", f"must be at least 1, got {self.trials}")
        if self.refine_rounds < 0:
            raise SettingError("refine_rounds", f"must be 0 (off) or more, got {self.refine_rounds}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise SettingError("timeout_s", f"must be a positive number, got {self.timeout_s}")
        if self.max_memory_mb is not None and not self.max_memory_mb > 0:
            raise SettingError("max_memory_mb", f"must be positive, got {self.max_memory_mb}")
        if not 0 <= self.seed < 2**32:
            raise SettingError("seed", f"must be between 0 and 2**32 - 1, got {self.seed}")

    def trials_for(self, space: SearchSpace) -> int:
        return self.trials if self.trials is not None else space.default_trials()

    def tolerance(self, precision: str) -> Tolerance:
        return self.fp32_tolerance if precision == "fp32" else self.int8_tolerance
