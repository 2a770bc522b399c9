"""Tuned profile against `ort-default` and `hindsight-local`, on the example and a heavier workload.

Tunes each workload (outputs in a temp dir), then benchmarks interleaved in one run and
prints p95 ratios. Usage: python benchmarks/tuned_vs_default.py [--trials 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import example_workload, heavy_workload

from autotune.analysis.bench import run_bench
from autotune.analysis.summary import format_bench
from autotune.host import default_probe
from autotune.search.space import SearchSettings
from autotune.search.tuner import RunOptions, tune


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    host = default_probe().probe()
    with tempfile.TemporaryDirectory() as tmp:
        for name, workload in (("example", example_workload()), ("heavy", heavy_workload())):
            path = Path(tmp) / f"{name}.jsonl"
            path.write_text("\n".join(__import__("json").dumps({"query": q.query, "documents": q.documents})
                                      for q in workload.queries) + "\n")
            settings = SearchSettings(trials=args.trials, repeats=1 if name == "heavy" else 3, final_rounds=3)
            outcome = tune(RunOptions(workload=path, env_file=Path(tmp) / f"{name}.env",
                                      profile_dir=Path(tmp) / "profiles", name=name, settings=settings,
                                      compose_file=None, fresh=True))
            result = run_bench(outcome.profile, workload, host, against=["ort-default", "hindsight-local"],
                               rounds=args.rounds)
            print(f"\n== {name} workload: {len(workload.queries)} queries, up to {workload.max_candidates} "
                  f"candidates; tuned {outcome.result.winner.config.label()}")
            print(format_bench(result))


if __name__ == "__main__":
    main()
