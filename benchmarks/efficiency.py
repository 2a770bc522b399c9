"""Useful GFLOP/s against the fp32 peak measured on this host (and the nominal one), baseline vs tuned.

The tuned configuration comes from a profile, or from flags (the `onnx` target's pool: Hindsight's
character sort, spinning off). Usage:

    python benchmarks/efficiency.py [--workload heavy] [--profile profiles/NAME.yaml]
    python benchmarks/efficiency.py --workload heavy --batch-size 8 --threads 2 --graph fused
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import WORKLOADS

from autotune.analysis.efficiency import ASSUMPTIONS, ModelDims, efficiency
from autotune.analysis.peak import measured_peak
from autotune.host import default_probe
from autotune.measure.stats import per_query_medians
from autotune.measure.timing import interleaved, replay
from autotune.outputs.profile import load_profile, profile_config
from autotune.runtime.engine import BASELINE, EngineConfig
from autotune.runtime.model import build_default_model
from autotune.runtime.targets import get_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="example", choices=sorted(WORKLOADS))
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--graph", default="plain", choices=("plain", "fused"))
    parser.add_argument("--arena", choices=("on", "off"), default="on")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    host = default_probe().probe()
    bundle = build_default_model()
    pool = get_target("onnx").pool(bundle, has_vnni=host.has_vnni, usable_cores=host.cores.usable)
    workload = WORKLOADS[args.workload]()
    tuned = (profile_config(load_profile(args.profile)) if args.profile else
             EngineConfig(args.batch_size, args.threads, True, "fp32", mem_arena=args.arena == "on", graph=args.graph))
    dims = ModelDims.from_config(bundle.config)
    assert dims is not None
    configs = [BASELINE, tuned]
    passes = interleaved([pool.engine(c).score for c in configs], workload.queries, args.rounds)
    print(f"host: {host.brand}, {host.cores.usable} usable cores, "
          f"{', '.join(k for k, v in host.isa.items() if v)}; workload {args.workload}")
    for config, p in zip(configs, passes, strict=True):
        shape = replay(pool.engine(config), workload.queries)
        threads = pool.effective(config).intra_op_threads or host.cores.usable
        e = efficiency(dims, host, shape.lengths, per_query_medians(p), shape.real_tokens, shape.padded_tokens,
                       threads=threads, measured_peak=measured_peak(threads))
        nominal = "unknown" if e.percent_of_peak is None else f"{e.percent_of_peak:.1f}%"
        print(f"{config.label():<48} {e.useful_gflops:7.1f} useful GFLOP/s at {threads} threads: "
              f"{e.percent_of_measured:.1f}% of the measured peak ({measured_peak(threads) / 1e9:.0f} GFLOP/s), "
              f"{nominal} of the nominal; padded/real {e.padding_overhead:.2f}")
    print(f"assumptions: {ASSUMPTIONS}")


if __name__ == "__main__":
    main()
