"""int8 judged by what the recall returns, before the search: which variant the search runs, if any.

Each scales variant (per-token first, then onnxruntime's dynamic per-channel and per-tensor) is judged at
batch size 1 against the fp32 reference by the int8 tolerance: the top 10 each query keeps (mean and worst),
above a score floor that catches the seed's traps. A per-token verdict holds at every batch; a dynamic one
can move with the batch, so every int8 trial is judged again on what it was timed on.
When neither passes, the accuracy-aware fallback Intel Neural Compressor uses: each weight MatMul's
sensitivity is measured alone (only it int8, on a sample of queries), and the least sensitive are quantized
first; a bisection finds the most MatMuls that can be int8 with the gate still passing. The sensitivities
depend on the model, the workload and the format, not on the host's load, so they are cached.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from autotune.errors import ModelError
from autotune.fileio import read_bound, sha256_bytes, write_bound
from autotune.gates.int8_speed import FALLBACK_WORTH, Int8Speed, evenly
from autotune.gates.parity import ParityReport, Tolerance, compare, logits
from autotune.measure.timing import replay, scores_of
from autotune.paths import cache_dir, caches_readable
from autotune.runtime.engine import REFERENCE, EngineConfig, OnnxPool, ScoringPool
from autotune.runtime.quantize import (
    SCALES,
    Int8Variant,
    alone_in_int8,
    int8_format,
    keep_fp32,
    least_sensitive_first,
    quantize_to,
    weight_matmuls,
)
from autotune.workload.queries import Workload

SENSITIVITY_QUERIES = 6  # the sample each MatMul's sensitivity is measured on
INT8 = replace(REFERENCE, precision="int8")
# per-token int8 scores a pair the same in any batch (within 0.0014 on the example), so it is judged as fast as the
# host can score: sorted batches on every usable core, not one pair at a time (issue 51)
INT8_BATCHED = EngineConfig(batch_size=16, intra_op_threads=0, length_sort=True, precision="int8")


def judged_at(scales: str) -> EngineConfig:
    """Where a variant's results are judged: per-token in batches; a dynamic variant, whose scores move with
    its batch, at batch 1 (and every int8 trial again at the batches it ran)."""
    return INT8_BATCHED if scales == "per-token" else INT8


@dataclass(frozen=True)
class Int8Verdict:
    """Each int8 variant tried, with its figures against fp32, and the one the search runs (None: none passed)."""

    reports: tuple[tuple[Int8Variant, ParityReport], ...]
    chosen: Int8Variant | None
    seconds: float = 0.0
    sensitivity: str | None = None  # how the fallback's sensitivities were had: "measured" or "cached"
    unbuilt: tuple[tuple[Int8Variant, str], ...] = ()  # variants this model's graph cannot be made into, and why
    speed: Int8Speed | None = None  # int8's speed against fp32, measured before any of this was judged
    fallback_skipped: str | None = None  # why the fallback did not run where no variant passed

    def lines(self) -> list[str]:
        out = [] if self.speed is None else [self.speed.line()]
        out += [f"int8 {v.label()}: cannot be built: {why}" for v, why in self.unbuilt]
        out += [f"int8 {v.label()}: {r.results()}: " + ("passes" if r.passed else f"fails: {r.reason()}")
                for v, r in self.reports]
        if self.fallback_skipped is not None:
            out.append(f"int8 fallback not run: {self.fallback_skipped}")
        if self.sensitivity is not None:
            out.append(f"int8 fallback: MatMul sensitivities {self.sensitivity}; {len(self.reports)} variants "
                       f"judged in {self.seconds:.0f} s")
        return out

    def reason(self) -> str:
        return "; ".join([f"{v.label()}: cannot be built" for v, _ in self.unbuilt]
                         + [f"{v.label()}: {r.reason()}" for v, r in self.reports])

    def to_dict(self) -> dict[str, object]:
        return {"chosen": None if self.chosen is None else self.chosen.to_dict(), "seconds": round(self.seconds, 1),
                "speed": None if self.speed is None else self.speed.to_dict(),
                "sensitivity": self.sensitivity, "unbuilt": [{**v.to_dict(), "why": why} for v, why in self.unbuilt],
                "variants": [{**v.to_dict(), "label": v.label(), **r.to_dict()} for v, r in self.reports]}


def judge_int8(pool: OnnxPool, workload: Workload, reference: list[np.ndarray], tolerance: Tolerance, *,
               has_vnni: bool, fallback: bool = True, speed: Int8Speed | None = None,
               until: float | None = None) -> Int8Verdict:
    """The first variant that passes, left as what the pool runs for int8; else the fallback's, else None.
    With `speed` (measured first), only the variants faster than fp32 beyond the noise are judged, and the
    fallback runs only where int8 is fast enough that keeping some MatMuls in fp32 can still pay, and (`until`, a
    clock value: the time plan's end for int8) only where its estimated cost fits what is left."""
    started = time.monotonic()
    source = pool.model_path(REFERENCE)
    matmuls = weight_matmuls(source)
    reports: list[tuple[Int8Variant, ParityReport]] = []
    unbuilt: list[tuple[Int8Variant, str]] = []
    one_variant_s = 0.0  # what judging one variant on the whole workload took, building it included
    for scales in SCALES if speed is None else speed.worth_judging():
        variant = Int8Variant(scales, matmuls=len(matmuls))
        pool.use_int8(variant)
        clock = time.monotonic()
        try:
            report = compare(reference, scores_of(pool, judged_at(scales), workload), tolerance)
        except ModelError as exc:
            unbuilt.append((variant, str(exc)))
            continue
        one_variant_s = max(one_variant_s, time.monotonic() - clock)
        reports.append((variant, report))
        if report.passed:
            return Int8Verdict(tuple(reports), variant, time.monotonic() - started, unbuilt=tuple(unbuilt),
                               speed=speed)
    pool.release()
    pays = speed is None or speed.best() >= FALLBACK_WORTH
    fits = until is None or time.monotonic() + fallback_cost_s(one_variant_s, len(matmuls), workload) <= until
    if not fallback or not pays or not fits or source is None or len(matmuls) < 2 or not reports:
        if fallback and reports and not fits:
            skipped = "its estimated cost passes the time plan's share for int8"
        elif fallback and reports and not pays and speed is not None:
            skipped = f"int8 is {speed.best():.2f}x fp32 at best here, too little to pay for MatMuls kept in fp32"
        else:
            skipped = None
        return Int8Verdict(tuple(reports), None, time.monotonic() - started, unbuilt=tuple(unbuilt), speed=speed,
                           fallback_skipped=skipped)
    scales = max(reports, key=lambda vr: vr[1].topk_mean)[0].scales  # the closest variant, refined
    sensitivity, how = sensitivities(pool, source, workload, reference, scales=scales, has_vnni=has_vnni)
    order = least_sensitive_first(sensitivity)
    # judged on the queries the sensitivities were not measured on, where there are enough of them
    measured = set(sensitivity_sample(workload))
    held: Sequence[int] = [i for i in range(len(workload.queries)) if i not in measured]
    if len(held) < SENSITIVITY_QUERIES:
        held = range(len(workload.queries))
    judging = Workload([workload.queries[i] for i in held], workload.sha256)
    judging_reference = [reference[i] for i in held]

    def judged(quantized: int) -> tuple[Int8Variant, ParityReport]:
        variant = Int8Variant(scales, keep_fp32(order, quantized), len(matmuls))
        report = compare(judging_reference, _scratch_scores(pool, source, variant, judging, has_vnni), tolerance)
        reports.append((variant, report))
        return variant, report

    chosen = bisect_quantized(len(order), judged)
    if chosen is not None:
        pool.use_int8(chosen)
    return Int8Verdict(tuple(reports), chosen, time.monotonic() - started, how, tuple(unbuilt), speed)


def sensitivity_sample(workload: Workload) -> list[int]:
    """`SENSITIVITY_QUERIES` queries spread evenly over the workload's sizes (pairs and characters), smallest to
    largest: the first few of a recording are no sample of it."""
    qs = workload.queries
    order = sorted(range(len(qs)), key=lambda i: (sum(len(d) for d in qs[i].documents), i))
    n = min(SENSITIVITY_QUERIES, len(order))
    return sorted(set(evenly(order, n)))


def fallback_cost_s(one_variant_s: float, matmuls: int, workload: Workload) -> float:
    """The fallback's cost from what one variant cost on the whole workload: each MatMul measured alone on the
    sensitivity sample, then a bisection's variants on the held-out queries."""
    share = min(1.0, SENSITIVITY_QUERIES / max(1, len(workload.queries)))
    return one_variant_s * (matmuls * share + math.ceil(math.log2(max(2, matmuls))) * (1.0 - share / 2))


def bisect_quantized(total: int, judged: Callable[[int], tuple[Int8Variant, ParityReport]]) -> Int8Variant | None:
    """The variant with the most MatMuls int8 that passes, assuming fewer int8 MatMuls never keep less (each
    step quantizes a superset of the last): all of them failed already, so the answer is below `total`."""
    lo, hi, best = 1, total - 1, None  # quantizing none is fp32 itself: no int8 variant
    while lo <= hi:
        mid = (lo + hi + 1) // 2
        variant, report = judged(mid)
        if report.passed:
            best, lo = variant, mid + 1
        else:
            hi = mid - 1
    return best


def sensitivities(pool: OnnxPool, source: Path, workload: Workload, reference: list[np.ndarray], *, scales: str,
                  has_vnni: bool) -> tuple[dict[str, float], str]:
    """Each weight MatMul's mean |Δlogit| with only it int8, on the first queries; cached by model, workload,
    scales, format and onnxruntime."""
    import onnxruntime

    names = weight_matmuls(source)
    picked = sensitivity_sample(workload)
    sample = Workload([workload.queries[i] for i in picked], workload.sha256)
    binding = {"kind": "int8-sensitivity", "model_sha256": pool.bundle.sha256, "workload_sha256": workload.sha256,
               "scales": scales, "format": int8_format(has_vnni), "onnxruntime": onnxruntime.__version__,
               "queries": picked, "matmuls": names, "graphs": "alone_in_int8"}  # not onnxruntime's quantizer
    key = sha256_bytes(json.dumps(binding, sort_keys=True).encode())[:24]
    path = cache_dir() / "int8-sensitivity" / f"{key}.json"
    if caches_readable():
        payload, _ = read_bound(path, binding)
        cached = _sensitivity_table(payload, names)
        if cached is not None:
            return cached, "cached"
    ref = logits([reference[i] for i in picked])
    measured = {}
    with tempfile.TemporaryDirectory(prefix="autotune-int8-") as scratch:
        for name, graph in alone_in_int8(source, scales, has_vnni=has_vnni, scratch=Path(scratch)):
            measured[name] = float(np.mean(np.abs(logits(_scores_on(pool, graph, scales, sample)) - ref)))
    write_bound(path, binding, json.dumps(measured, indent=1).encode())
    return measured, "measured"


def _sensitivity_table(payload: bytes | None, names: list[str]) -> dict[str, float] | None:
    """A cached table, where it holds a finite, non-negative figure for exactly these MatMuls."""
    try:
        table = json.loads(payload) if payload is not None else None
    except ValueError:
        return None
    if not isinstance(table, dict) or set(table) != set(names):
        return None
    values = {str(k): v for k, v in table.items()}
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
               for v in values.values()):
        return None
    return {k: float(v) for k, v in values.items()}


def _scratch_scores(pool: OnnxPool, source: Path, variant: Int8Variant, workload: Workload,
                    has_vnni: bool) -> list[np.ndarray]:
    """A variant's scores from a graph quantized into a scratch file (the cache keeps only what is chosen)."""
    with tempfile.TemporaryDirectory(prefix="autotune-int8-") as scratch:
        path = quantize_to(Path(scratch) / "model.onnx", source, has_vnni=has_vnni, variant=variant)
        return _scores_on(pool, path, variant.scales, workload)


def _scores_on(pool: OnnxPool, graph: Path, scales: str, workload: Workload) -> list[np.ndarray]:
    """Scores from a graph file of the judge's own, in a session made for it and freed at once."""
    engine = pool.engine_on(graph, judged_at(scales))
    return replay(engine, workload.queries, keep_scores=True).scores



def int8_scatter(pool: ScoringPool, config: EngineConfig, workload: Workload, reference: list[np.ndarray],
                 verdict: Int8Verdict | None, limit: int = 600) -> dict[str, Any]:
    """Reference fp32 scores beside int8 scores (the winner's other knobs) for the report's scatter, and how each
    int8 variant was judged (`variant`: the one the search ran, None where none passed)."""
    int8 = scores_of(pool, replace(config, precision="int8"), workload)
    fp32 = np.concatenate(reference)
    quant = np.concatenate(int8)
    step = max(1, len(fp32) // limit)
    judged = None if verdict is None else verdict.to_dict()
    return {"fp32": [round(float(x), 6) for x in fp32[::step]], "int8": [round(float(x), 6) for x in quant[::step]],
            **({} if judged is None else {"variant": judged["chosen"], "judged": judged})}
