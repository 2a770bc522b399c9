"""The parity gate: a candidate's scores against the fp32 reference, query by query.

The reference is the fp32 model at batch size 1 with no sort, computed once per
(model, workload, onnxruntime) and cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autotune.paths import cache_dir
from autotune.runtime.engine import REFERENCE
from autotune.runtime.sessions import EnginePool
from autotune.search.measure import replay
from autotune.workload.queries import Workload


@dataclass(frozen=True)
class Tolerance:
    max_abs: float
    min_spearman: float
    min_topk: float

    def __post_init__(self) -> None:
        import math

        if not all(math.isfinite(v) for v in (self.max_abs, self.min_spearman, self.min_topk)):
            from autotune.errors import OptionsError

            raise OptionsError(f"parity tolerances must be finite numbers, got {self}")

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


# fp32 differs from the reference only by summation order: anything larger is a bug.
FP32_TOLERANCE = Tolerance(max_abs=1e-4, min_spearman=0.999, min_topk=1.0)
# int8 moves scores; these bounds keep the ranking a user sees (see docs/how-it-decides.md, "Parity gate").
INT8_TOLERANCE = Tolerance(max_abs=0.02, min_spearman=0.98, min_topk=0.9)


def rank(values: np.ndarray) -> np.ndarray:
    """Average ranks of ties, as Spearman's rho needs."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(len(values), dtype=np.float64)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2:
        return 1.0
    ra, rb = rank(a), rank(b)
    if ra.std() == 0 or rb.std() == 0:
        return 1.0 if np.array_equal(ra, rb) else 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def topk_overlap(a: np.ndarray, b: np.ndarray, k: int | None = None) -> float:
    k = min(10, len(a)) if k is None else k
    top_a = set(np.argsort(-a, kind="mergesort")[:k].tolist())
    top_b = set(np.argsort(-b, kind="mergesort")[:k].tolist())
    return len(top_a & top_b) / k


@dataclass(frozen=True)
class ParityReport:
    max_abs: float
    spearman: float
    topk: float
    worst_query: int
    tolerance: Tolerance

    @property
    def violation(self) -> float:
        """> 0 means the candidate fails (Optuna's constraint convention)."""
        t = self.tolerance
        worst = max(self.max_abs - t.max_abs, t.min_spearman - self.spearman, t.min_topk - self.topk)
        return min(worst, 1e9) if worst == worst else 1e9  # finite, and NaN counts as failing

    @property
    def passed(self) -> bool:
        return self.violation <= 0

    def reason(self) -> str:
        t = self.tolerance
        parts = []
        if self.max_abs > t.max_abs:
            parts.append(f"max |Δscore| {self.max_abs:.2e} > {t.max_abs:.0e}")
        if self.spearman < t.min_spearman:
            parts.append(f"Spearman {self.spearman:.4f} < {t.min_spearman}")
        if self.topk < t.min_topk:
            parts.append(f"top-k overlap {self.topk:.2f} < {t.min_topk}")
        return "; ".join(parts) + f" (query #{self.worst_query})" if parts else "ok"

    def to_dict(self) -> dict[str, Any]:
        return {"max_abs_diff": self.max_abs, "spearman_min": self.spearman, "topk_overlap_min": self.topk,
                "worst_query": self.worst_query, "tolerance": self.tolerance.to_dict(), "passed": self.passed}


def compare(reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray], tolerance: Tolerance) -> ParityReport:
    max_abs, rho, topk, worst, worst_violation = 0.0, 1.0, 1.0, 0, -np.inf
    for i, (ref, cand) in enumerate(zip(reference, candidate, strict=True)):
        if not (np.all(np.isfinite(ref)) and np.all(np.isfinite(cand))):
            return ParityReport(float("inf"), 0.0, 0.0, i, tolerance)  # NaN compares false: never let it pass
        q_abs = float(np.max(np.abs(ref - cand)))
        q_rho = spearman(ref, cand)
        q_top = topk_overlap(ref, cand)
        max_abs, rho, topk = max(max_abs, q_abs), min(rho, q_rho), min(topk, q_top)
        v = max(q_abs - tolerance.max_abs, tolerance.min_spearman - q_rho, tolerance.min_topk - q_top)
        if v > worst_violation:
            worst, worst_violation = i, v
    return ParityReport(max_abs, rho, topk, worst, tolerance)


def reference_scores(pool: EnginePool, workload: Workload, onnxruntime_version: str) -> list[np.ndarray]:
    """fp32, batch size 1, no sort; cached per (model, workload, onnxruntime, max length)."""
    key = f"{pool.bundle.sha256[:16]}-{workload.sha256[:16]}-ort{onnxruntime_version}-L{pool.max_length}"
    path = cache_dir() / "references" / f"{key}.npz"
    if path.exists():
        try:
            with np.load(path) as data:
                return [data[f"q{i}"] for i in range(len(workload.queries))]
        except (OSError, KeyError, ValueError):
            pass
    scores = replay(pool.engine(REFERENCE), workload.queries, keep_scores=True).scores
    _save_npz(path, {f"q{i}": s for i, s in enumerate(scores)})
    return scores


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    import io

    from autotune.fileio import write_atomic

    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    write_atomic(path, buf.getvalue(), output=False)
