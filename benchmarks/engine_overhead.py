"""What the engine costs beyond ONNX Runtime: tokenization, padding and Python.

Prints, per configuration, end-to-end per-query time against the sum of `session.run`
time alone, both from the same passes. Usage: python benchmarks/engine_overhead.py
"""

from __future__ import annotations

import argparse

from _common import example_workload, setup

from autotune.measure.timing import replay, warm_up
from autotune.runtime.engine import BASELINE, EngineConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    host, _bundle, pool = setup()
    workload = example_workload()
    usable = host.cores.usable  # type: ignore[attr-defined]
    configs = [BASELINE, EngineConfig(4, usable, True, "fp32"), EngineConfig(1, usable, False, "fp32")]
    print(f"{'configuration':<40} {'end-to-end / session.run':>26} {'overhead share':>16}")
    for config in configs:
        engine = pool.engine(config)
        warm_up(engine, workload.queries)
        total = inference = 0.0
        for _ in range(args.passes):
            p = replay(engine, workload.queries)
            total += sum(p.seconds)
            inference += p.inference_s
        print(f"{config.label():<40} {total / inference:>25.3f}x {1 - inference / total:>15.1%}")


if __name__ == "__main__":
    main()
