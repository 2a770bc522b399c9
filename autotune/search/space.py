"""The search space and the settings of one search: what may be tried, and how hard to measure it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import optuna

from autotune.errors import OptionsError
from autotune.runtime.engine import BASELINE, BATCH_SIZES, EngineConfig
from autotune.runtime.model import PRECISIONS
from autotune.search.parity import FP32_TOLERANCE, INT8_TOLERANCE, Tolerance


@dataclass(frozen=True)
class SearchSpace:
    batch_sizes: tuple[int, ...]
    threads: tuple[int, ...]
    length_sort: tuple[bool, ...] = (False, True)
    precisions: tuple[str, ...] = PRECISIONS
    mem_arena: tuple[bool, ...] = (True,)
    default_sort: bool = False  # what Hindsight does with this target when nobody tunes it
    default_arena: bool = True

    @classmethod
    def for_host(
        cls,
        *,
        usable_cores: int,
        max_candidates: int,
        batch_sizes: Sequence[int] | None = None,
        precisions: Sequence[str] | None = None,
        max_threads: int | None = None,
    ) -> SearchSpace:
        """Batch sizes are capped at the most candidates any query has (larger ones are identical)."""
        grid = tuple(batch_sizes) if batch_sizes else BATCH_SIZES
        if any(b < 1 for b in grid):
            raise OptionsError("batch sizes must be positive integers")
        capped = tuple(sorted({min(b, max_candidates) for b in grid}))
        top = usable_cores if max_threads is None else max_threads
        if top < 1:
            raise OptionsError(f"--max-threads must be at least 1, got {top}")
        if top > usable_cores:
            raise OptionsError(f"--max-threads {top} is more than the {usable_cores} cores this process may use "
                               "(affinity and cgroup quota): more threads only contend for them")
        prec = tuple(precisions) if precisions else PRECISIONS
        bad = [p for p in prec if p not in PRECISIONS]
        if bad:
            raise OptionsError(f"unknown precision {bad[0]!r}; choose from {', '.join(PRECISIONS)}")
        # 0 is onnxruntime's own default (the baseline's); 1..usable are explicit pools.
        return cls(batch_sizes=capped, threads=tuple(range(0, top + 1)), precisions=prec)

    def suggest(self, trial: optuna.Trial) -> EngineConfig:
        return EngineConfig(
            batch_size=int(trial.suggest_categorical("batch_size", list(self.batch_sizes))),
            intra_op_threads=int(trial.suggest_categorical("intra_op_threads", list(self.threads))),
            length_sort=bool(trial.suggest_categorical("length_sort", list(self.length_sort))),
            precision=str(trial.suggest_categorical("precision", list(self.precisions))),
            mem_arena=bool(trial.suggest_categorical("mem_arena", list(self.mem_arena))),
        )

    def baseline(self) -> EngineConfig:
        """Hindsight's default, as it behaves on this workload (batch 32, capped like the rest)."""
        return EngineConfig(batch_size=min(BASELINE.batch_size, max(self.batch_sizes)),
                            intra_op_threads=0, length_sort=self.default_sort, precision="fp32",
                            mem_arena=self.default_arena)

    def size(self) -> int:
        return (len(self.batch_sizes) * len(self.threads) * len(self.length_sort) * len(self.precisions)
                * len(self.mem_arena))

    def dimensions(self) -> dict[str, list[object]]:
        return {"batch_size": list(self.batch_sizes), "intra_op_threads": list(self.threads),
                "length_sort": list(self.length_sort), "precision": list(self.precisions),
                "mem_arena": list(self.mem_arena)}

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.__dict__, sort_keys=True, default=list).encode()).hexdigest()[:8]


@dataclass(frozen=True)
class SearchSettings:
    trials: int = 30
    timeout_s: float | None = None
    seed: int = 0
    repeats: int = 3
    finalists: int = 3
    final_rounds: int = 3
    prune_ratio: float = 1.5
    fp32_tolerance: Tolerance = FP32_TOLERANCE
    int8_tolerance: Tolerance = INT8_TOLERANCE

    def __post_init__(self) -> None:
        for name in ("trials", "repeats", "final_rounds"):
            if getattr(self, name) < 1:
                raise OptionsError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise OptionsError(f"--timeout must be positive, got {self.timeout_s}")
        if self.prune_ratio <= 1.0:
            raise OptionsError("--prune-ratio must be above 1")
        if not 0 <= self.seed < 2**32:
            raise OptionsError(f"--seed must be between 0 and 2**32 - 1, got {self.seed}")
        if self.timeout_s is not None and self.timeout_s != self.timeout_s:
            raise OptionsError("--timeout must be a number")

    def tolerance(self, precision: str) -> Tolerance:
        return self.fp32_tolerance if precision == "fp32" else self.int8_tolerance
