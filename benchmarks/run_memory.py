"""Memory: the estimate against the measured peak, and a whole run's peak on the heavy workload.

1. For batch sizes 1 to 100, arena on and off: the RSS a served session adds (measured in a
   fresh process, as `run` does) beside the estimate made before running it, and their ratio.
2. `autotune run` on the heavy workload (4 x 100 candidates up to ~300 tokens) with default
   settings: the tuner process's peak RSS (the kernel's high-water mark), which must stay
   under 2 GB, and its measuring time by phase.

Usage: python benchmarks/run_memory.py [--skip-run | --run-only] [--keep DIR]
(--keep leaves the heavy workload, the profile and the model in DIR, for `autotune bench`.)
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
from pathlib import Path

from _common import WORKLOADS
from search_efficiency import write_jsonl

from autotune.host import default_probe
from autotune.measure.memory import ModelMemory
from autotune.measure.served_memory import measure_served
from autotune.pipeline.options import RunOptions
from autotune.pipeline.tune import tune
from autotune.runtime.engine import EngineConfig
from autotune.runtime.model import build_default_model
from autotune.runtime.targets import get_target
from autotune.runtime.tokenize import PairTokenizer
from autotune.search.objective import batch_shapes
from autotune.search.space import SearchSettings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--skip-run", action="store_true", help="only the estimates against served sessions")
    mode.add_argument("--run-only", action="store_true", help="only the whole run on the heavy workload")
    parser.add_argument("--keep", type=Path, help="a new folder to leave the run's workload, profile and model in")
    args = parser.parse_args()
    if not args.run_only:
        estimates()
    if not args.skip_run:
        heavy_run(args.keep)


def estimates() -> None:
    """Part 1: the served sessions' measured RSS against the estimate."""
    bundle = build_default_model()
    host = default_probe().probe()
    traits = get_target("onnx").traits(host.cores.usable, bundle.max_length)  # as `run` measures it
    model = ModelMemory.from_config(bundle.config, bundle.onnx_path.stat().st_size)
    assert model is not None
    tokenizer = PairTokenizer(bundle.tokenizer_path, 512)
    print("workload  batch  arena  estimated MB  measured MB  measured/estimated")
    for name in ("example", "heavy"):
        workload = WORKLOADS[name]()
        lengths = [[len(e.ids) for e in tokenizer.encode(q.query, q.documents)] for q in workload.queries]
        for bs in (1, 8, 32, 100):
            for arena in (False, True):
                config = EngineConfig(bs, 0, True, "fp32", mem_arena=arena)
                shapes = [s for ls in lengths for s in batch_shapes(ls, bs, True)]
                estimate = max(model.session_mb(*s) for s in shapes)
                served = measure_served(bundle, has_vnni=False, traits=traits, config=config,
                                        queries=workload.queries)
                measured = float("nan") if served is None else served.served_mb
                print(f"{name:<8}  {bs:>5}  {'on' if arena else 'off':>5}  {estimate:12.0f}  {measured:11.0f}  "
                      f"{measured / estimate:18.2f}")


def heavy_run(keep: Path | None) -> None:
    """Part 2: a whole default run on the heavy workload, its peak RSS and its measuring time."""
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch) if keep is None else keep
        tmp.mkdir(parents=True, exist_ok=keep is None)
        path = write_jsonl(WORKLOADS["heavy"](), tmp / "heavy.jsonl")
        os.environ["AUTOTUNE_STATE_DIR"] = str(tmp / "state")
        outcome = tune(RunOptions(workload=path, env_file=tmp / ".env", profile_dir=tmp / "p",
                                  name="heavy", compose_file=None, model_out=tmp / "model",
                                  settings=SearchSettings()))
    memory = outcome.profile["memory"]
    # ru_maxrss is reset with the kernel's mark by each trial's measurement; the profile's figure is the
    # process's peak across every reset
    peak_mb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, memory["tuner_peak_rss_mb"])
    print(f"\nautotune run on the heavy workload: peak RSS {peak_mb:.0f} MB (limit 2048 MB), tuner peak during "
          f"trials {memory['tuner_peak_rss_mb']:.0f} MB; the chosen {outcome.result.winner.config.label()} adds "
          f"{memory['served_mb']:.0f} MB served (estimated {memory['estimated_mb']:.0f} MB)")
    phases = ", ".join(f"{k} {v:.0f} s" for k, v in outcome.result.phases_s.items())
    print(f"measuring time {outcome.result.measuring_s:.0f} s ({phases}); whole run {outcome.result.elapsed_s:.0f} s")


if __name__ == "__main__":
    main()
