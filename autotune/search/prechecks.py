"""Checks made once before the search, so that no trial is spent on a knob that cannot win.

- int8: whether it keeps parity depends on the model and the quantization format, and hardly
  on batch size, threads or sort (see `benchmarks/int8_parity.py`). It is checked once at
  batch size 1, in the workload's order; if it fails, `int8` leaves the space and the reason
  goes into the output and the profile. A finalist in int8 is checked again on the full
  workload, as every finalist is.
- the fused graph: made once; when attention does not fuse, `fused` leaves the space.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from autotune.errors import ModelError, OptionsError
from autotune.runtime.engine import REFERENCE, ScoringPool
from autotune.runtime.space import SearchSpace
from autotune.search.measure import replay
from autotune.search.parity import Tolerance, compare
from autotune.workload.queries import Workload


@dataclass(frozen=True)
class Dropped:
    knob: str
    value: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"knob": self.knob, "value": self.value, "reason": self.reason}

    def line(self) -> str:
        return f"{self.knob}={self.value} left out of the search: {self.reason}"


def int8_parity(pool: ScoringPool, workload: Workload, reference: list[np.ndarray],
                tolerance: Tolerance) -> str | None:
    """None when int8 keeps parity at batch size 1, else the reason it does not."""
    scores = replay(pool.engine(replace(REFERENCE, precision="int8")), workload.queries, keep_scores=True).scores
    report = compare(reference, scores, tolerance)
    return None if report.passed else report.reason()


def fused_graph(pool: ScoringPool) -> str | None:
    """None when the fused graph exists (made now if need be), else why it cannot be made."""
    from autotune.runtime.fusion import FusionUnavailable

    if pool.model_path(REFERENCE) is None:
        return "this target does not run an ONNX graph"
    try:
        pool.model_path(replace(REFERENCE, graph="fused"))
    except (FusionUnavailable, ModelError) as exc:
        return str(exc)
    return None


def prechecked(space: SearchSpace, pool: ScoringPool, workload: Workload, reference: list[np.ndarray],
               int8_tolerance: Tolerance) -> tuple[SearchSpace, list[Dropped]]:
    """The space without the knob values that cannot win, and why each went."""
    dropped: list[Dropped] = []
    if "fused" in space.graphs:
        reason = fused_graph(pool)
        if reason is not None:
            dropped.append(Dropped("graph", "fused", reason))
            space = space.narrowed(graphs=tuple(g for g in space.graphs if g != "fused"))
    if "int8" in space.precisions:
        reason = int8_parity(pool, workload, reference, int8_tolerance)
        if reason is not None:
            dropped.append(Dropped("precision", "int8", f"it fails parity at batch size 1: {reason}"))
            space = space.narrowed(precisions=tuple(p for p in space.precisions if p != "int8"))
            if not space.precisions:
                raise OptionsError(f"int8 fails parity on this model and workload ({reason}), and --precisions "
                                   "left nothing else to search: add fp32")
    return space, dropped

