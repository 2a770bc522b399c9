"""int8 against fp32 on the embedded default (a trained encoder): which quantization keeps the ranking?

For each variant of onnxruntime's dynamic quantization (the format autotune uses, per-tensor; per-channel;
reduce_range; the attention/FFN output projections kept fp32; only the FFN quantized) this prints, against
the fp32 reference at batch size 1 with no sort:
- the parity figures the gate judges (max |Δlogit|, the worst query's Spearman, the worst top-k overlap) and
  whether `INT8_TOLERANCE` passes it;
- the mean top-1 kept and the mean top-3 overlap with fp32, which are what a Hindsight user sees;
- the speed ratio: fp32 p95 ÷ variant p95, interleaved in this run (batch 4, sort on, 2 threads).

Both weight formats run: u8s8 (what autotune uses with AVX512-VNNI) and u8u8 (without it). The host's ISA
is printed; a format's arithmetic is exact on either ISA, its speed is this host's only.
Usage: python benchmarks/int8_variants.py [--workloads example,longtail] [--rounds 5]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _common import WORKLOADS

from autotune.host import default_probe
from autotune.runtime.engine import EngineConfig
from autotune.runtime.model import build_default_model, load_model_dir, quiet_root_logger
from autotune.runtime.sessions import EnginePool
from autotune.search.measure import interleaved, replay
from autotune.search.parity import INT8_TOLERANCE, compare, reference_scores
from autotune.search.stats import p95_ms


@dataclass(frozen=True)
class Variant:
    name: str
    per_channel: bool = False
    reduce_range: bool = False
    exclude: tuple[str, ...] = ()  # initializer-name fragments of the MatMuls kept fp32
    options: dict[str, Any] = field(default_factory=dict)


VARIANTS = [
    Variant("per-tensor (autotune's)"),
    Variant("per-channel", per_channel=True),
    Variant("reduce-range", reduce_range=True),
    Variant("per-channel, reduce-range", per_channel=True, reduce_range=True),
    Variant("attention/FFN outputs fp32", exclude=(".output.weight",)),  # both output projections
    Variant("FFN only (attention fp32)", exclude=("query", "key", "value", "attention.output")),
]


def quantize(bundle: Any, variant: Variant, fmt: str, out_dir: Path) -> Path:
    """A model directory (the quantized graph and the bundle's tokenizer files) for one variant."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(bundle.onnx_path))
    excluded = [n.name for n in model.graph.node if n.op_type == "MatMul"
                and any(part in name for name in n.input for part in variant.exclude)]
    out_dir.mkdir(parents=True)
    with warnings.catch_warnings(), quiet_root_logger():
        warnings.simplefilter("ignore")
        quantize_dynamic(bundle.onnx_path, out_dir / "model.onnx", op_types_to_quantize=["MatMul"],
                         weight_type=QuantType.QInt8 if fmt == "u8s8" else QuantType.QUInt8,
                         per_channel=variant.per_channel, reduce_range=variant.reduce_range,
                         nodes_to_exclude=excluded,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "special_tokens_map.json"):
        if (bundle.directory / name).exists():
            shutil.copy2(bundle.directory / name, out_dir / name)
    return out_dir


def result_agreement(reference: list[np.ndarray], scores: list[np.ndarray]) -> tuple[float, float]:
    """Mean over queries: top-1 kept, and the share of fp32's top 3 still in the top 3."""
    top1 = [int(np.argmax(r) == np.argmax(s)) for r, s in zip(reference, scores, strict=True)]
    k = [len(set(np.argsort(-r)[:3]) & set(np.argsort(-s)[:3])) / min(3, len(r))
         for r, s in zip(reference, scores, strict=True)]
    return float(np.mean(top1)), float(np.mean(k))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="example,longtail")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--formats", default="u8s8,u8u8")
    parser.add_argument("--variants", default="all", help="comma-separated indices into VARIANTS (0-based)")
    args = parser.parse_args()
    host = default_probe().probe()
    bundle = build_default_model()
    print(f"host: {host.brand}, {host.cores.usable} usable cores, avx512_vnni={host.has_vnni}, "
          f"onnxruntime {host.onnxruntime}; model: {bundle.name}")
    print(f"gate (INT8_TOLERANCE): max|Δ| <= {INT8_TOLERANCE.max_abs}, Spearman >= {INT8_TOLERANCE.min_spearman}, "
          f"top-k >= {INT8_TOLERANCE.min_topk}")
    timed = EngineConfig(4, 2, True, "fp32")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.workloads.split(","):
            workload = WORKLOADS[name]()
            fp32 = EnginePool(bundle, has_vnni=host.has_vnni)
            reference = reference_scores(fp32, workload, host.onnxruntime)
            print(f"\n[{name}] {len(workload.queries)} queries")
            print(f"  {'format':6}  {'variant':30}  {'max|Δ|':>7}  {'Spearman':>8}  {'top-k':>5}  "
                  f"{'top-1 kept':>10}  {'top-3':>5}  {'fp32/int8 p95':>13}  gate")
            for fmt in args.formats.split(","):
                for i, variant in enumerate(VARIANTS):
                    if args.variants != "all" and str(i) not in args.variants.split(","):
                        continue
                    directory = quantize(bundle, variant, fmt, Path(tmp) / f"{name}-{fmt}-{i}")
                    pool = EnginePool(load_model_dir(directory), has_vnni=host.has_vnni)
                    scores = replay(pool.engine(EngineConfig(1, 0, False, "fp32")), workload.queries,
                                    keep_scores=True).scores
                    report = compare(reference, scores, INT8_TOLERANCE)
                    top1, top3 = result_agreement(reference, scores)
                    passes = interleaved([fp32.engine(timed).score, pool.engine(timed).score], workload.queries,
                                         args.rounds)
                    ratio = p95_ms(passes[0]) / p95_ms(passes[1])
                    print(f"  {fmt:6}  {variant.name:30}  {report.max_abs:7.3f}  {report.spearman:8.4f}  "
                          f"{report.topk:5.2f}  {top1:10.2f}  {top3:5.2f}  {ratio:12.2f}x  "
                          f"{'pass' if report.passed else 'fail'}")
                    pool.release()


if __name__ == "__main__":
    main()
