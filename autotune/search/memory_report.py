"""The memory figures a run estimates with and reports: the estimate calibrated on one measured session, and
what the pick needs when served (`served_memory`), beside the estimate and the tuner's own peak."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import optuna

from autotune.measure.memory import ModelMemory, PeakRss, process_peak_mb
from autotune.measure.served_memory import BurstPlan, measure_served
from autotune.runtime.engine import EngineConfig, ScoringPool
from autotune.runtime.model import ModelBundle
from autotune.runtime.onnx_files import model_bytes
from autotune.search.objective import Objective
from autotune.workload.queries import Workload

NOTE = ("served_mb is the RSS that the reranker's session and its largest batch add to the process that serves it, "
        "measured in a fresh process; burst.added_mb is what every worker at once on the longest input adds "
        "(burst.peak_mb: that whole process): size a compose or Kubernetes memory limit from it")


@dataclass(frozen=True)
class MemoryReport:
    """What the served configuration needs (None where no ONNX session was measured), and what it was held to."""

    served_mb: float | None
    estimated_mb: float | None
    burst: dict[str, Any] | None  # every worker at once on the longest input (`served_memory.Burst`)
    tuner_peak_rss_mb: float | None
    budget_mb: float

    @property
    def estimate_ratio(self) -> float | None:
        if not self.estimated_mb or self.served_mb is None:
            return None
        return self.served_mb / self.estimated_mb

    def served_max_length(self) -> int | None:
        """The input length the burst measurement cut the sidecar to, when shorter than the model's own."""
        burst = self.burst or {}
        length, model_max = burst.get("max_input_length"), burst.get("model_max_length")
        return length if length is not None and model_max is not None and length < model_max else None

    def to_dict(self) -> dict[str, Any]:
        ratio = self.estimate_ratio
        return {"served_mb": None if self.served_mb is None else round(self.served_mb, 1),
                "estimated_mb": None if self.estimated_mb is None else round(self.estimated_mb, 1),
                "estimate_ratio": None if ratio is None else round(ratio, 3),
                "burst": self.burst,
                "tuner_peak_rss_mb": None if self.tuner_peak_rss_mb is None else round(self.tuner_peak_rss_mb, 1),
                "budget_mb": round(self.budget_mb, 1), "note": NOTE}


def calibrated_memory_model(bundle: ModelBundle, pool: ScoringPool, workload: Workload,
                            lengths: list[list[int]] | None) -> ModelMemory | None:
    """The memory model, calibrated on one measured session scoring the workload's longest pair alone."""
    model = ModelMemory.from_config(bundle.config, model_bytes(bundle.onnx_path))
    if model is None or not lengths:
        return model
    longest, q, d = max((n, q, d) for q, row in enumerate(lengths) for d, n in enumerate(row))
    query = workload.queries[q]
    config = EngineConfig(batch_size=1, intra_op_threads=1, length_sort=False, precision="fp32")
    pool.release()
    with PeakRss() as peak:
        pool.engine(config).score(query.query, [query.documents[d]])
    pool.release()
    return model.calibrated(peak.growth_mb, longest)


def memory_report(pool: ScoringPool, config: EngineConfig, workload: Workload, objective: Objective,
                  budget_mb: float, study: optuna.Study, has_vnni: bool, *, server_module: str | None
                  ) -> MemoryReport:
    """What the served configuration needs, measured in a fresh process: its session and largest batch on the
    workload, and every worker at once on the longest input it will be sent (`burst`, what a memory limit must
    hold); beside the estimate made before running it and the tuner's own peak."""
    served = None
    if pool.model_path(config) is not None:  # an ONNX session, whose memory a fresh process can measure
        pool.release()  # the child's peak is not the parent's to share
        served = measure_served(pool.bundle, has_vnni=has_vnni, traits=pool.traits, config=config,
                                queries=workload.queries,
                                plan=BurstPlan(objective.memory_model, budget_mb, server_module),
                                variant=pool.int8_variant)
    peaks = [process_peak_mb()] + [t.user_attrs["rss_mb"] for t in study.get_trials(deepcopy=False)
                                   if "rss_mb" in t.user_attrs]
    return MemoryReport(served_mb=None if served is None else served.served_mb,
                        estimated_mb=objective.estimate_mb(config),
                        burst=None if served is None or served.burst is None else served.burst.to_dict(),
                        tuner_peak_rss_mb=max(peaks) if peaks else None, budget_mb=budget_mb)
