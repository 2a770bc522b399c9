"""Which knob bounds a batch better for `serve`: the batch size, or TEI's token budget?

A batch size caps rows; a token budget caps rows x longest, so it lets short pairs batch wide and
long ones narrow. On each workload this races, interleaved in one run, the `tei` engine with a
batch size alone (no budget) against a wide batch size (64) cut by a budget alone, and prints each
one's p95 and the best of each family as a ratio. Usage: python benchmarks/budget_vs_batch.py
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from _common import WORKLOADS

from autotune.host import default_probe
from autotune.measure.stats import per_query_medians, percentile
from autotune.measure.timing import interleaved
from autotune.runtime.engine import EngineConfig
from autotune.runtime.model import build_default_model
from autotune.runtime.sessions import EnginePool
from autotune.runtime.targets import get_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workloads", default="example,heavy,longtail")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    host = default_probe().probe()
    bundle = build_default_model()
    traits = get_target("tei").traits(host.cores.usable, bundle.max_length)
    print(f"host: {host.brand}, {host.cores.usable} usable cores; the tei engine, threads at onnxruntime's default")
    for name in args.workloads.split(","):
        workload = WORKLOADS[name]()
        contenders = [(f"batch {b}", EnginePool(bundle, has_vnni=host.has_vnni,
                                                  traits=replace(traits, max_batch_tokens=None)), b)
                      for b in (2, 4, 8, 16)]
        contenders += [(f"budget {t}", EnginePool(bundle, has_vnni=host.has_vnni,
                                                    traits=replace(traits, max_batch_tokens=t)), 64)
                       for t in (512, 1024, 2048, 4096)]
        engines = [pool.engine(EngineConfig(b, 0, True, "fp32")) for _, pool, b in contenders]
        passes = interleaved([e.score for e in engines], workload.queries, args.rounds)
        p95 = {label: percentile(per_query_medians(p), 95) * 1000.0
               for (label, _, _), p in zip(contenders, passes, strict=True)}
        print(f"\n[{name}] " + ", ".join(f"{k}: {v:.0f} ms" for k, v in p95.items()))
        best_batch = min((v, k) for k, v in p95.items() if k.startswith("batch"))
        best_budget = min((v, k) for k, v in p95.items() if k.startswith("budget"))
        print(f"  best by batch size: {best_batch[1]}; best by budget: {best_budget[1]}; "
              f"batch-size best / budget best p95 = {best_batch[0] / best_budget[0]:.2f}")


if __name__ == "__main__":
    main()
