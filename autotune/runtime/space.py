"""The search space: every configuration a target lets the tuner try, and Hindsight's defaults among them.

A target defines it (`Target.space`), so it sits with the targets in `runtime`; how hard the search
measures it is `search.space.SearchSettings`. Optuna is only a type here: `suggest` asks a trial.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from autotune.errors import OptionsError
from autotune.runtime.engine import BASELINE, BATCH_SIZES, EngineConfig
from autotune.runtime.model import PRECISIONS

if TYPE_CHECKING:
    import optuna


@dataclass(frozen=True)
class SearchSpace:
    batch_sizes: tuple[int, ...]
    threads: tuple[int, ...]
    length_sort: tuple[bool, ...] = (False, True)
    precisions: tuple[str, ...] = PRECISIONS
    mem_arena: tuple[bool, ...] = (True,)
    graphs: tuple[str, ...] = ("plain",)
    spinning: tuple[bool, ...] = (True,)
    workers: tuple[int, ...] = (1,)
    core_budget: int | None = None  # workers x threads (0 threads: all of them) may not pass it
    default_sort: bool = False  # what Hindsight does with this target when nobody tunes it
    default_arena: bool = True
    default_spinning: bool = True

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
        return cls(batch_sizes=capped, threads=tuple(range(0, top + 1)), precisions=prec, core_budget=usable_cores)

    def suggest(self, trial: optuna.Trial) -> EngineConfig:
        return EngineConfig(
            batch_size=int(trial.suggest_categorical("batch_size", list(self.batch_sizes))),
            intra_op_threads=int(trial.suggest_categorical("intra_op_threads", list(self.threads))),
            length_sort=bool(trial.suggest_categorical("length_sort", list(self.length_sort))),
            precision=str(trial.suggest_categorical("precision", list(self.precisions))),
            mem_arena=bool(trial.suggest_categorical("mem_arena", list(self.mem_arena))),
            graph=str(trial.suggest_categorical("graph", list(self.graphs))),
            spinning=bool(trial.suggest_categorical("spinning", list(self.spinning))),
            workers=int(trial.suggest_categorical("workers", list(self.workers))),
        )

    def fits(self, config: EngineConfig) -> bool:
        """Workers x intra-op threads within the usable cores: more only contend for them."""
        if self.core_budget is None or config.workers == 1:
            return True
        return config.workers * (config.intra_op_threads or self.core_budget) <= self.core_budget

    def heaviest(self) -> EngineConfig:
        """The configuration that holds the most memory: the largest batch, fp32 where it is searched, the arena
        on, as many workers (each a session of its own where the target gives them one) as the cores allow."""
        return EngineConfig(batch_size=max(self.batch_sizes), intra_op_threads=1, length_sort=False,
                            precision="fp32" if "fp32" in self.precisions else self.precisions[0],
                            mem_arena=max(self.mem_arena), graph="plain",
                            workers=max(w for w in self.workers if w <= (self.core_budget or w)))

    def baseline(self) -> EngineConfig:
        """Hindsight's default, as it behaves on this workload (batch 32, capped like the rest)."""
        return EngineConfig(batch_size=min(BASELINE.batch_size, max(self.batch_sizes)),
                            intra_op_threads=0, length_sort=self.default_sort, precision="fp32",
                            mem_arena=self.default_arena, graph="plain", spinning=self.default_spinning)

    def size(self) -> int:
        """Configurations that fit the cores (every combination, when workers is fixed)."""
        if len(self.workers) == 1:
            return math.prod(len(values) for values in self.dimensions().values())
        return len(self.grid())

    def dimensions(self) -> dict[str, list[object]]:
        """Each knob's values, keyed by its `EngineConfig` field (and Optuna parameter) name."""
        return {"batch_size": list(self.batch_sizes), "intra_op_threads": list(self.threads),
                "length_sort": list(self.length_sort), "precision": list(self.precisions),
                "mem_arena": list(self.mem_arena), "graph": list(self.graphs), "spinning": list(self.spinning),
                "workers": list(self.workers)}

    def grid(self) -> list[EngineConfig]:
        """Every configuration, for an exhaustive comparison."""
        dims = self.dimensions()
        every = [EngineConfig(**dict(zip(dims, values, strict=True)))  # type: ignore[arg-type]  # each knob's own type
                 for values in itertools.product(*dims.values())]
        return [c for c in every if self.fits(c)]

    def neighbours(self, config: EngineConfig) -> list[EngineConfig]:
        """One knob changed at a time: batch size one step either way, every other value of the rest."""
        out: list[EngineConfig] = []
        for knob, values in self.dimensions().items():
            current = getattr(config, knob)
            candidates: list[Any]  # the knob's own type: an int, a bool or a string
            if knob == "batch_size":
                ordered = sorted(self.batch_sizes)
                candidates = [b for b in ordered if b < current][-1:] + [b for b in ordered if b > current][:1]
            else:
                candidates = [v for v in values if v != current]
            for v in candidates:
                moved: dict[str, Any] = {knob: v}
                out.append(replace(config, **moved))
        return [c for c in out if self.fits(c)]

    def default_trials(self) -> int:
        """Trials scale with the space: about a sixth of it, at least 12 and at most 60. The search only
        has to land in the right basin: the refinement after it finds the local optimum, side by side."""
        return max(12, min(60, math.ceil(self.size() / 6)))

    def narrowed(self, **values: Any) -> SearchSpace:
        """The same space with some knobs' values replaced (a knob dropped after a pre-check)."""
        known = {f.name for f in fields(self)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown knobs {sorted(unknown)}")
        return replace(self, **values)

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.__dict__, sort_keys=True, default=list).encode()).hexdigest()[:8]
