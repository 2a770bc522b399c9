"""int8 against fp32 on the embedded default (a trained encoder): speed and what the recall keeps, per variant.

The variants are autotune's own (`autotune.runtime.quantize.Int8Variant`): per-token, per-channel and
per-tensor scales with every weight MatMul int8, and per-channel with the most sensitive MatMuls kept fp32
(the fallback's order, `autotune.gates.int8_judge.sensitivities`, measured or cached). With `--static`, also
onnxruntime's static QDQ (per-channel weights, uint8 activations, MinMax calibration on the first 6 queries'
pairs, at most half of them), which autotune does not search (docs/benchmarks.md); its figures are on the
other queries only.
For each it prints, against the fp32 reference at batch size 1 with no sort:
- top-10 kept (mean over queries, and the worst query), top-3 kept, the share of queries whose first result
  stays first: what a Hindsight user sees;
- max |Δscore| and the mean logit shift: the score floor;
- whether `INT8_TOLERANCE` passes it;
- the largest move of a score (0-1) between batch 1 and sorted batches of 32: how much a verdict judged at one
  batch can differ at another;
- the speed ratio fp32 p95 / variant p95, interleaved in this run (batch 4, sort on, 2 threads), so the two
  share whatever else the host was doing.

Both weight formats can run: u8s8 (autotune's with VNNI) and u8u8 (without it); the host's ISA is printed, and
a format's speed is this host's only.
Usage: python benchmarks/int8_variants.py [--workloads example,longtail] [--rounds 5] [--formats u8s8]
       [--keep-fp32 0,6,12,18] [--static]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from _common import WORKLOADS, host_line

from autotune.gates.int8_judge import sensitivities
from autotune.gates.parity import INT8_TOLERANCE, compare, reference_scores
from autotune.host import default_probe
from autotune.measure.stats import p95_ms
from autotune.measure.timing import interleaved, replay
from autotune.runtime.engine import REFERENCE, EngineConfig
from autotune.runtime.model import build_default_model
from autotune.runtime.quantize import (
    SCALES,
    Int8Variant,
    keep_fp32,
    least_sensitive_first,
    quantize_to,
    weight_matmuls,
)
from autotune.runtime.sessions import EnginePool
from autotune.workload.queries import Workload

CALIBRATION = 6  # queries the static variant is calibrated on (as many as the fallback's sensitivity sample),
# at most half the workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="example")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--formats", default="u8s8,u8u8")
    parser.add_argument("--keep-fp32", default="0,6,12,18",
                        help="per-channel variants with this many of the most sensitive MatMuls kept fp32")
    parser.add_argument("--static", action="store_true", help="add onnxruntime's static QDQ, for comparison")
    args = parser.parse_args()
    host = default_probe().probe()
    bundle = build_default_model()
    print(f"{host_line(host)}; model: {bundle.name}")
    t = INT8_TOLERANCE
    print(f"gate: top-10 kept >= {t.min_topk_mean} mean, >= {t.min_topk} worst; max|Δ| <= {t.max_abs}; "
          f"|shift| <= {t.max_shift} logits")
    timed = EngineConfig(4, 2, True, "fp32")
    int8 = EngineConfig(4, 2, True, "int8")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.workloads.split(","):
            workload = WORKLOADS[name]()
            fp32 = EnginePool(bundle, has_vnni=host.has_vnni)
            reference = reference_scores(fp32, workload, host.onnxruntime)
            source = fp32.model_path(REFERENCE)
            total = len(weight_matmuls(source))
            pairs = sum(len(q.documents) for q in workload.queries)
            print(f"\n[{name}] {len(workload.queries)} queries, {pairs} pairs")
            print(f"  {'format':6}  {'variant':28}  {'top-10 mean/worst':>17}  {'top-3':>5}  {'top-1':>5}  "
                  f"{'max|Δ|':>6}  {'shift':>6}  {'b1 vs b32':>9}  {'fp32/int8 p95':>13}  gate")
            for fmt in args.formats.split(","):
                vnni = fmt == "u8s8"
                variants = [Int8Variant(scales, matmuls=total) for scales in SCALES]
                order = least_sensitive_first(sensitivities(fp32, source, workload, reference,
                                                            scales="per-channel", has_vnni=vnni)[0])
                variants += [Int8Variant("per-channel", keep_fp32(order, total - k), total)
                             for k in map(int, args.keep_fp32.split(",")) if k]
                rows = [(v.label(), quantize_to(Path(tmp) / f"{name}-{fmt}-{i}.onnx", source, has_vnni=vnni,
                                                variant=v), workload, reference) for i, v in enumerate(variants)]
                if args.static:
                    cut = min(CALIBRATION, len(workload.queries) // 2)  # at least half the queries held out
                    held = Workload(workload.queries[cut:], workload.sha256)
                    rows.append((f"static QDQ (held out: {len(held.queries)} q)",
                                 static_qdq(fp32, source, workload.queries[:cut], Path(tmp) / f"static-{fmt}.onnx",
                                            vnni), held, reference[cut:]))
                for label, path, judged, ref in rows:
                    scores = replay(fp32.engine_on(path, REFERENCE), judged.queries, keep_scores=True).scores
                    batched = replay(fp32.engine_on(path, EngineConfig(32, 2, True, "int8")), judged.queries,
                                     keep_scores=True).scores
                    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(scores, batched, strict=True))
                    r = compare(ref, scores, INT8_TOLERANCE)
                    passes = interleaved([fp32.engine(timed).score, fp32.engine_on(path, int8).score],
                                         workload.queries, args.rounds)
                    ratio = p95_ms(passes[0]) / p95_ms(passes[1])
                    print(f"  {fmt:6}  {label:28}  {r.topk_mean:9.3f}/{r.topk:.2f}     {r.top3_mean:5.3f}  "
                          f"{r.top1:5.2f}  {r.max_abs:6.3f}  {r.shift:+6.3f}  {moved:9.4f}  {ratio:12.2f}x  "
                          f"{'pass' if r.passed else 'fail'}")


def static_qdq(pool: EnginePool, source: Path, calibration: list, out: Path, has_vnni: bool) -> Path:
    """onnxruntime's static QDQ of the weight MatMuls, calibrated (MinMax) on these queries' pairs, one at a time."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    names = pool.backend(REFERENCE).input_names
    feeds = [pool.tokenizer.pad([e], names).feeds for q in calibration for e in pool.tokenizer.encode(q.query,
                                                                                                     q.documents)]

    class Pairs(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter(feeds)

        def get_next(self) -> dict | None:
            return next(self.feeds, None)

    quantize_static(str(source), str(out), Pairs(), quant_format=QuantFormat.QDQ, op_types_to_quantize=["MatMul"],
                    nodes_to_quantize=weight_matmuls(source), per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8 if has_vnni else QuantType.QUInt8)
    return out


if __name__ == "__main__":
    main()
