"""Do the fallback's in-memory sensitivity graphs rank the MatMuls as onnxruntime's quantizer's graphs do?

The int8 fallback measures each weight MatMul alone in int8 and keeps the most sensitive in fp32. Its graphs
were made by each variant's builder (onnxruntime's `quantize_dynamic` for the dynamic scales: a whole
quantization per MatMul); they are now one in-memory rewrite per MatMul (`quantize.alone_in_int8`), which for
the dynamic scales emits the kernel onnxruntime fuses its own graph into. This measures both ways side by side
on one workload and prints the rank correlation of the two sensitivity tables, how many of the k most
sensitive MatMuls they share, and the time ratio. Usage: python benchmarks/int8_sensitivity.py [--scales ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import WORKLOADS, host_line, setup

from autotune.gates.int8_judge import judged_at, sensitivity_sample
from autotune.gates.parity import logits, reference_scores, spearman
from autotune.measure.timing import replay
from autotune.runtime.engine import REFERENCE
from autotune.runtime.quantize import Int8Variant, alone_in_int8, int8_format, quantize_to, weight_matmuls
from autotune.workload.queries import Workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scales", default="per-channel,per-token")
    parser.add_argument("--workload", default="example")
    args = parser.parse_args()
    host, _bundle, pool = setup()
    workload = WORKLOADS[args.workload]()
    reference = reference_scores(pool, workload, host.onnxruntime)
    picked = sensitivity_sample(workload)
    sample = Workload([workload.queries[i] for i in picked], workload.sha256)
    ref = logits([reference[i] for i in picked])
    source = pool.model_path(REFERENCE)
    names = weight_matmuls(source)
    print(f"{host_line(host)}; int8 format {int8_format(host.has_vnni)}; {len(names)} MatMuls, "
          f"{sum(len(q.documents) for q in sample.queries)} pairs each")

    def sensitivity(graph: Path, scales: str) -> float:
        scores = replay(pool.engine_on(graph, judged_at(scales)), sample.queries, keep_scores=True).scores
        return float(np.mean(np.abs(logits(scores) - ref)))

    for scales in args.scales.split(","):
        with tempfile.TemporaryDirectory() as scratch:
            clock = time.perf_counter()
            built = {}
            for name in names:
                variant = Int8Variant(scales, tuple(n for n in names if n != name), len(names))
                built[name] = sensitivity(quantize_to(Path(scratch) / "b.onnx", source, has_vnni=host.has_vnni,
                                                      variant=variant), scales)
            built_s = time.perf_counter() - clock
            clock = time.perf_counter()
            alone = {name: sensitivity(graph, scales)
                     for name, graph in alone_in_int8(source, scales, has_vnni=host.has_vnni, scratch=Path(scratch))}
            alone_s = time.perf_counter() - clock
        a, b = [built[n] for n in names], [alone[n] for n in names]
        rho = spearman(np.array(a), np.array(b))
        shares = []
        for k in (3, 6, 12):
            top_built = set(sorted(names, key=built.__getitem__)[-k:])
            top_alone = set(sorted(names, key=alone.__getitem__)[-k:])
            shares.append(f"top {k}: {len(top_built & top_alone)}/{k}")
        diff = max(abs(x - y) for x, y in zip(a, b, strict=True))
        print(f"{scales:12s} spearman {rho:.4f}  {', '.join(shares)}  max |d sensitivity| {diff:.2e}  "
              f"time built/in-memory {built_s / alone_s:.2f}x")


if __name__ == "__main__":
    main()
