"""Percentiles, spread and noise checks, in the manner of `pyperf check`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NOISY_SPREAD = 0.10  # std / mean, as pyperf warns


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def per_query_medians(passes: Sequence[Sequence[float]]) -> list[float]:
    """passes[r][i] is query i's latency in pass r; returns each query's median."""
    return [float(v) for v in np.median(np.asarray(passes, dtype=np.float64), axis=0)]


def p95_ms(passes: Sequence[Sequence[float]]) -> float:
    """The objective, in ms, from passes[r][i] in seconds: p95 across queries of each query's median."""
    return percentile(per_query_medians(passes), 95) * 1000.0


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p95_ms: float
    p99_ms: float

    @classmethod
    def from_seconds(cls, per_query: Sequence[float]) -> Latency:
        return cls(*(percentile(per_query, q) * 1000.0 for q in (50, 95, 99)))


def relative_spread(values: Sequence[float]) -> float:
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.std() / arr.mean()) if len(arr) > 1 and arr.mean() > 0 else 0.0


def noise_warnings(spreads: dict[str, float], best_gap: float | None) -> list[str]:
    """Warn when repeats of one configuration vary more than candidates differ."""
    warnings = []
    worst = max(spreads.values(), default=0.0)
    if worst >= NOISY_SPREAD:
        warnings.append(f"repeats of one configuration vary by {worst:.0%} (std/mean); "
                        "figures may be unstable: close other workloads or raise --repeats")
    if best_gap is not None and worst > 0 and best_gap < worst:
        warnings.append(f"the best two configurations differ by {best_gap:.1%}, less than the "
                        f"run-to-run spread ({worst:.1%}): treat them as tied")
    return warnings
