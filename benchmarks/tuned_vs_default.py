"""Each target's tuned profile against Hindsight's defaults, on the example and a heavier workload.

For each workload it tunes every target asked for (outputs in a temp dir), then benchmarks
them all interleaved in one run against `hindsight-onnx` (Hindsight 1.1's onnx provider at its
defaults) and `hindsight-local` (its PyTorch default), and prints the p95 ratios.
Usage: python benchmarks/tuned_vs_default.py [--targets onnx,local,tei] [--trials 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from _common import example_workload, heavy_workload

from autotune.analysis.bench import run_bench
from autotune.analysis.summary import format_bench
from autotune.host import default_probe
from autotune.pipeline.options import RunOptions
from autotune.pipeline.tune import tune
from autotune.search.space import SearchSettings

OWN_DEFAULT = {"onnx": "hindsight-onnx", "local": "hindsight-local", "tei": "hindsight-onnx"}


def own_default_ratios(result: object, targets: list[str]) -> str:
    """Each tuned target against Hindsight's default for that same provider, per round, from the one run."""
    rows = {r.name: r for r in result.rows}  # type: ignore[attr-defined]
    lines = ["p95 ratio, Hindsight's default for the provider / the tuned target (median, min-max over rounds):"]
    for i, target in enumerate(targets):
        tuned = rows.get("profile" if i == 0 else f"profile:{target}")
        default = rows.get(OWN_DEFAULT[target])
        if tuned is None or default is None:
            lines.append(f"  {target}: not measured ({OWN_DEFAULT[target]} skipped)")
            continue
        per_round = [d / x for d, x in zip(default.round_p95_ms, tuned.round_p95_ms, strict=True)]
        lines.append(f"  {target} vs {OWN_DEFAULT[target]}: {statistics.median(per_round):.2f}x "
                     f"({min(per_round):.2f}-{max(per_round):.2f}x)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--targets", default="onnx,local", help="comma-separated; the first is benched")
    parser.add_argument("--workloads", default="example,heavy")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    host = default_probe().probe()
    isa = ",".join(k for k, v in host.isa.items() if v)
    print(f"host: {host.brand}, {host.cores.usable} usable cores, ISA {isa}, onnxruntime {host.onnxruntime}")
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    workloads = {"example": example_workload, "heavy": heavy_workload}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.workloads.split(","):
            workload = workloads[name]()
            path = Path(tmp) / f"{name}.jsonl"
            path.write_text("\n".join(json.dumps({"query": q.query, "documents": q.documents})
                                      for q in workload.queries) + "\n")
            profiles = Path(tmp) / name / "profiles"
            outcomes = {}
            for target in targets:
                settings = SearchSettings(trials=args.trials, repeats=1 if name == "heavy" else 3, final_rounds=3)
                start = time.perf_counter()
                outcomes[target] = tune(RunOptions(
                    workload=path, env_file=Path(tmp) / f"{name}-{target}.env", profile_dir=profiles,
                    name=f"{target}", settings=settings, compose_file=None, fresh=True, target=target,
                    model_out=Path(tmp) / name / "models" / target))
                print(f"tuned {name} for {target} in {time.perf_counter() - start:.0f} s: "
                      f"{outcomes[target].result.winner.config.label()}")
            first = outcomes[targets[0]]
            result = run_bench(first.profile, workload, host, against=["hindsight-onnx", "hindsight-local"],
                               rounds=args.rounds, profile_path=first.profile_path)
            print(f"\n== {name} workload: {len(workload.queries)} queries, up to {workload.max_candidates} "
                  f"candidates; `profile` is the {targets[0]} target, `profile:X` the others")
            print(format_bench(result))
            print(own_default_ratios(result, targets))


if __name__ == "__main__":
    main()
