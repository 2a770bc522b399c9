"""The parity gate: a candidate's scores against the fp32 reference, query by query.

The reference is the fp32 model at batch size 1 with no sort, computed once per
(model, workload, onnxruntime) and cached, bound to what made it and spot-checked on every read.
"""

from __future__ import annotations

import io
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autotune.fileio import read_bound, write_bound
from autotune.measure.timing import replay
from autotune.paths import cache_dir, caches_readable
from autotune.runtime.engine import REFERENCE, EngineTraits
from autotune.runtime.model import ModelBundle
from autotune.runtime.sessions import EnginePool
from autotune.workload.queries import Workload


@dataclass(frozen=True)
class Tolerance:
    """`max_abs` bounds any pair's score (Hindsight's 0-1 score), `min_spearman` and `min_topk` the worst query's
    rank correlation and top-10 overlap; `max_shift` bounds the mean signed move in logits over every pair (a
    systematic shift moves a `min_scores` cut even where the order holds), `min_topk_mean` the mean top-10 overlap."""

    max_abs: float
    min_spearman: float
    min_topk: float
    max_shift: float = 1e9
    min_topk_mean: float = 0.0

    def __post_init__(self) -> None:
        import math

        if not all(math.isfinite(v) for v in (self.max_abs, self.min_spearman, self.min_topk, self.max_shift,
                                               self.min_topk_mean)):
            from autotune.errors import OptionsError

            raise OptionsError(f"parity tolerances must be finite numbers, got {self}")

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


# fp32 differs from the reference only by summation order: anything larger is a bug.
FP32_TOLERANCE = Tolerance(max_abs=1e-4, min_spearman=0.999, min_topk=1.0)
# int8 moves every score a little and reorders near-ties nobody sees: it is judged by the results (each query's
# top 10 kept, mean and worst) above a score floor loose enough for quantization noise and tight enough for the
# traps: a sigmoid applied twice, a mismatched tokenizer, a NaN or constant model, a shifted `min_scores` cut
# (see docs/how-it-decides.md, "Judging int8"). Spearman over every candidate is not gated: near-ties rule it.
INT8_TOLERANCE = Tolerance(max_abs=0.25, min_spearman=0.0, min_topk=0.8, max_shift=0.2, min_topk_mean=0.95)
_CLIP = 1e-7  # logits of scores within this of 0 or 1 are clipped: a saturated score has no finite logit


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
    shift: float = 0.0  # mean signed logit move over every pair
    topk_mean: float = 1.0
    top3_mean: float = 1.0
    top1: float = 1.0  # share of queries whose first result stays first

    @property
    def violation(self) -> float:
        """> 0 means the candidate fails (Optuna's constraint convention)."""
        t = self.tolerance
        worst = max(self.max_abs - t.max_abs, t.min_spearman - self.spearman, t.min_topk - self.topk,
                    abs(self.shift) - t.max_shift, t.min_topk_mean - self.topk_mean)
        return min(worst, 1e9) if worst == worst else 1e9  # finite, and NaN counts as failing

    @property
    def passed(self) -> bool:
        return self.violation <= 0

    def reason(self) -> str:
        t = self.tolerance
        parts = []
        if self.max_abs > t.max_abs:
            parts.append(f"max |Δscore| {self.max_abs:.2e} > {t.max_abs:g}")
        if abs(self.shift) > t.max_shift:
            parts.append(f"scores shifted by {self.shift:+.3f} logits on average (floor ±{t.max_shift:g}): a "
                         "min_scores cut would move")
        if self.topk_mean < t.min_topk_mean:
            parts.append(f"top-10 kept {self.topk_mean:.3f} on average < {t.min_topk_mean}")
        if self.spearman < t.min_spearman:
            parts.append(f"Spearman {self.spearman:.4f} < {t.min_spearman}")
        if self.topk < t.min_topk:
            parts.append(f"top-k overlap {self.topk:.2f} < {t.min_topk}")
        return "; ".join(parts) + f" (query #{self.worst_query})" if parts else "ok"

    def results(self) -> str:
        """What a user sees of the candidate, in words."""
        return (f"top-10 kept {self.topk_mean:.3f} (worst query {self.topk:.2f}), top-3 {self.top3_mean:.3f}, "
                f"top result still first {self.top1:.0%}; max |Δscore| {self.max_abs:.3f}, shift {self.shift:+.3f}")

    def to_dict(self) -> dict[str, Any]:
        return {"max_abs_diff": self.max_abs, "spearman_min": self.spearman, "topk_overlap_min": self.topk,
                "topk_overlap_mean": self.topk_mean, "top3_overlap_mean": self.top3_mean, "top1_kept": self.top1,
                "logit_shift": self.shift, "worst_query": self.worst_query, "tolerance": self.tolerance.to_dict(),
                "passed": self.passed}


def compare(reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray], tolerance: Tolerance) -> ParityReport:
    max_abs, rho, topk, worst, worst_violation = 0.0, 1.0, 1.0, 0, -np.inf
    tops, top3s, firsts, moves = [], [], [], []
    for i, (ref, cand) in enumerate(zip(reference, candidate, strict=True)):
        if not (np.all(np.isfinite(ref)) and np.all(np.isfinite(cand))):
            return ParityReport(float("inf"), 0.0, 0.0, i, tolerance, float("inf"), 0.0, 0.0, 0.0)  # NaN never passes
        q_abs = float(np.max(np.abs(ref - cand))) if len(ref) else 0.0
        q_rho = spearman(ref, cand)
        q_top = topk_overlap(ref, cand) if len(ref) else 1.0
        max_abs, rho, topk = max(max_abs, q_abs), min(rho, q_rho), min(topk, q_top)
        tops.append(q_top)
        if len(ref):
            top3s.append(topk_overlap(ref, cand, min(3, len(ref))))
            firsts.append(float(np.argmax(ref) == np.argmax(cand)))
            moves.append(_logit(cand) - _logit(ref))
        v = max(q_abs - tolerance.max_abs, tolerance.min_spearman - q_rho, tolerance.min_topk - q_top)
        if v > worst_violation:
            worst, worst_violation = i, v
    shift = float(np.mean(np.concatenate(moves))) if moves else 0.0
    return ParityReport(max_abs, rho, topk, worst, tolerance, shift, float(np.mean(tops)) if tops else 1.0,
                        float(np.mean(top3s)) if top3s else 1.0, float(np.mean(firsts)) if firsts else 1.0)


def _logit(scores: np.ndarray) -> np.ndarray:
    p = np.clip(scores.astype(np.float64), _CLIP, 1 - _CLIP)
    return np.log(p / (1 - p))


def logits(scores: Sequence[np.ndarray]) -> np.ndarray:
    """Every pair's score as a logit, in one array (clipped where a score is saturated)."""
    return np.concatenate([_logit(s) for s in scores]) if len(scores) else np.zeros(0)


def fresh_reference(bundle: ModelBundle, has_vnni: bool, onnxruntime_version: str, workload: Workload,
                    max_tokens: int | None, note: Callable[[str], None] | None = None) -> list[np.ndarray]:
    """The fp32 reference on a pool of its own, truncated as the target truncates; its session is freed after."""
    pool = EnginePool(bundle, has_vnni=has_vnni, traits=EngineTraits(max_tokens=max_tokens), max_sessions=1)
    return reference_scores(pool, workload, onnxruntime_version, note=note)


REFERENCE_FORMAT = 2  # what a cached reference's bytes mean; a new meaning gets a new number
SPOT_CHECKS = 2  # cached queries re-scored on every read, chosen at random: a planted file is caught, not trusted
SPOT_TOLERANCE = 1e-4  # fp32 against itself: the same graph, batch 1, no sort


def reference_scores(pool: EnginePool, workload: Workload, onnxruntime_version: str, *,
                     note: Callable[[str], None] | None = None) -> list[np.ndarray]:
    """fp32, batch size 1, no sort; cached per (model, workload, onnxruntime, max length).

    A cached reference is bound to what made it (the model's and the workload's sha256, the format, the
    length) and spot-checked: a few of its queries, drawn at random on each read, are scored again and must
    agree. A mismatch rebuilds it and says so; `--fresh` never reads it (issue 50)."""
    binding = {"format": REFERENCE_FORMAT, "model_sha256": pool.bundle.sha256, "workload_sha256": workload.sha256,
               "onnxruntime": onnxruntime_version, "max_length": pool.max_length,
               "documents": [len(q.documents) for q in workload.queries]}
    key = f"{pool.bundle.sha256[:16]}-{workload.sha256[:16]}-ort{onnxruntime_version}-L{pool.max_length}"
    path = cache_dir() / "references" / f"{key}.npz"
    engine = pool.engine(REFERENCE)
    if caches_readable():
        cached, why = _cached_reference(path, binding, workload, engine)
        if cached is not None:
            return cached
        if why is not None and note is not None:
            note(f"the cached fp32 reference was not used ({why}): computing it again")
    scores = replay(engine, workload.queries, keep_scores=True).scores
    buf = io.BytesIO()
    np.savez(buf, **{f"q{i}": s for i, s in enumerate(scores)})  # type: ignore[arg-type]  # numpy's stub
    write_bound(path, binding, buf.getvalue())
    return scores


def _cached_reference(path: Path, binding: dict[str, Any], workload: Workload, engine: Any
                      ) -> tuple[list[np.ndarray] | None, str | None]:
    payload, why = read_bound(path, binding)
    if payload is None:
        return None, why
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as data:
            scores = [np.asarray(data[f"q{i}"], dtype=np.float32) for i in range(len(workload.queries))]
    except (OSError, KeyError, ValueError):
        return None, "it is not a readable reference"
    pairs = zip(scores, workload.queries, strict=True)
    if any(len(s) != len(q.documents) or not np.isfinite(s).all() for s, q in pairs):
        return None, "its scores do not match the workload's documents"
    rng = random.Random(os.urandom(8))
    for i in rng.sample(range(len(scores)), min(SPOT_CHECKS, len(scores))):
        q = workload.queries[i]
        again = engine.score(q.query, q.documents).scores
        if float(np.max(np.abs(np.asarray(again) - scores[i]), initial=0.0)) > SPOT_TOLERANCE:
            return None, f"query #{i + 1}'s cached scores differ from the model's own"
    return scores, None
