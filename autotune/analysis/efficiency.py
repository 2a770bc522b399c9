"""Useful work against the host's physical limit.

FLOPs per pair come from config.json (matmuls plus attention, as a function of the real
sequence length); the peak from the probe (usable cores x clock x fp32 FLOPs per cycle).
Padding is excluded from useful work, and reported as its own overhead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autotune.host import HostInfo

ASSUMPTIONS = (
    "FLOPs count multiply-adds as 2 and cover the encoder's matmuls, attention scores and context, the pooler and "
    "head; embeddings, LayerNorm, softmax and GELU are ignored. Peak assumes 2 FMA units per core "
    "(AVX-512: 64, AVX2: 32 fp32 FLOPs/cycle) at the advertised clock, for fp32 (int8 configurations are "
    "compared with the same fp32 peak). The measured peak is a 1024x1024x1024 fp32 MatMul through onnxruntime "
    "at the configuration's thread count, best of 7. Useful work counts real tokens only."
)


@dataclass(frozen=True)
class ModelDims:
    layers: int
    hidden: int
    intermediate: int

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ModelDims | None:
        try:
            return cls(int(config["num_hidden_layers"]), int(config["hidden_size"]),
                       int(config["intermediate_size"]))
        except (KeyError, TypeError, ValueError):
            return None

    def flops_per_pair(self, length: int) -> float:
        h, f, n = self.hidden, self.intermediate, length
        per_layer = 8 * n * h * h + 4 * n * n * h + 4 * n * h * f
        return self.layers * per_layer + 2 * h * h + 2 * h


def peak_flops(host: HostInfo) -> float | None:
    if not host.clock_hz:
        return None
    per_cycle = 64 if host.isa.get("avx512f") else 32 if host.isa.get("avx2") else 16
    return host.cores.usable * host.clock_hz * per_cycle


@dataclass(frozen=True)
class Efficiency:
    useful_gflops: float
    percent_of_peak: float | None  # of the nominal peak (clock x FMA width x usable cores)
    padding_overhead: float
    percent_of_measured: float | None = None  # of a large MatMul through onnxruntime at the same threads
    threads: int | None = None

    def to_dict(self) -> dict[str, Any]:
        def pct(value: float | None) -> float | None:
            return None if value is None else round(value, 2)

        return {"useful_gflop_s": round(self.useful_gflops, 2), "percent_of_peak": pct(self.percent_of_peak),
                "percent_of_measured_peak": pct(self.percent_of_measured), "threads": self.threads,
                "padding_overhead": round(self.padding_overhead, 3)}


def efficiency(dims: ModelDims, host: HostInfo, lengths: Sequence[Sequence[int]], seconds: Sequence[float],
               real_tokens: int, padded_tokens: int, *, threads: int | None = None,
               measured_peak: float | None = None) -> Efficiency:
    """lengths[q] are query q's real pair lengths; seconds[q] its measured (median) latency.

    `measured_peak` is the attainable FLOP/s at the configuration's `threads` (see `peak`).
    """
    flops = sum(dims.flops_per_pair(n) for q in lengths for n in q)
    useful = flops / max(sum(seconds), 1e-12) / 1e9
    peak = peak_flops(host)
    return Efficiency(useful, None if peak is None else 100.0 * useful * 1e9 / peak,
                      padded_tokens / max(real_tokens, 1),
                      None if not measured_peak else 100.0 * useful * 1e9 / measured_peak, threads)
