"""Useful GFLOP/s and percentage of the host's fp32 peak, baseline against a tuned configuration.

Usage: python benchmarks/efficiency.py [--profile profiles/NAME.yaml]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import example_workload, setup

from autotune.analysis.efficiency import ASSUMPTIONS, ModelDims, efficiency
from autotune.outputs.profile import load_profile, profile_config
from autotune.runtime.engine import BASELINE, EngineConfig
from autotune.search.measure import interleaved, replay
from autotune.search.stats import per_query_medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    host, bundle, pool = setup()
    workload = example_workload()
    usable = host.cores.usable  # type: ignore[attr-defined]
    tuned = profile_config(load_profile(args.profile)) if args.profile else EngineConfig(4, usable, True, "fp32")
    dims = ModelDims.from_config(bundle.config)  # type: ignore[attr-defined]
    assert dims is not None
    configs = [BASELINE, tuned]
    passes = interleaved([pool.engine(c).score for c in configs], workload.queries, args.rounds)
    results = []
    for config, p in zip(configs, passes, strict=True):
        shape = replay(pool.engine(config), workload.queries)
        results.append(efficiency(dims, host, shape.lengths, per_query_medians(p), shape.real_tokens,  # type: ignore[arg-type]
                                  shape.padded_tokens))
    for config, e in zip(configs, results, strict=True):
        peak = "unknown" if e.percent_of_peak is None else f"{e.percent_of_peak:.1f}% of peak"
        print(f"{config.label():<40} {e.useful_gflops:7.1f} useful GFLOP/s  {peak:>16}  "
              f"padded/real {e.padding_overhead:.2f}")
    print(f"tuned / baseline useful throughput: {results[1].useful_gflops / results[0].useful_gflops:.2f}x")
    print(f"assumptions: {ASSUMPTIONS}")


if __name__ == "__main__":
    main()
