"""Does `autotune run` with default settings pick what an exhaustive grid would, for less?

For each workload (example, heavy, longtail), on the `onnx` target:
1. the grid: every configuration of the run's space (after the same int8 and fused-graph
   pre-checks), each measured as a trial is without successive halving (warm-up, then
   `repeats` passes of the whole workload); its measuring time is the sum of those trials;
2. `autotune run` (the `tune` function, default settings, a fresh study) for each seed;
3. every seed's pick and the grid's best, re-measured interleaved in one race, each as it runs
   here (0 threads resolved): a pick that runs as the grid's best is that configuration, ratio 1.
   The grid's best runs twice in that race, and the ratio between its two entries (A/A) is
   printed: a pick's distance from the grid's best means little below it. `--race-rounds` (10):
   5 rounds left an A/A of 0.893 on a noisy host, more than the 5% bar.

It prints each seed's run as it ends: its measuring time (search, refinement and re-race) / the
grid's measuring time, beside its whole wall time (with the reference, the pre-checks, the
served-memory check and the outputs) / the grid's, and its peak RSS (each run has a fresh process,
as the CLI does; the kernel's high-water mark across the per-trial resets).
Then the race: each pick's p95 / the grid's best p95. Then `explain`'s leave-one-out on each
distinct pick: a revert faster beyond the noise (every round agrees, and by more than 3%) is
counted.

The grids and the seeds' runs take hours, so `--cache DIR` keeps each grid's result and each seed's
run there (with its refinement steps and its own re-race, to tell why a pick missed); a later
invocation with the same folder, workload, host and autotune source resumes where the last one
stopped. The race and the leave-one-out are always measured afresh. Usage:

    python benchmarks/search_efficiency.py [--workloads example,heavy,longtail] [--seeds 0,1,2,3,4]
                                           [--cache DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import optuna
from _common import WORKLOADS

import autotune
from autotune.analysis.explain import explain
from autotune.fileio import write_atomic
from autotune.gates.parity import reference_scores
from autotune.gates.prechecks import prechecked
from autotune.host import default_probe
from autotune.measure.memory import process_peak_mb
from autotune.pipeline.options import RunOptions
from autotune.pipeline.tune import tune
from autotune.runtime.engine import EngineConfig
from autotune.runtime.model import build_default_model
from autotune.runtime.targets import SpaceLimits, get_target
from autotune.search.finalists import rerace
from autotune.search.objective import Objective
from autotune.search.space import SearchSettings
from autotune.search.study import best_feasible_config
from autotune.workload.queries import Workload


def write_jsonl(workload: Workload, path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": q.id, "query": q.query, "documents": q.documents}) + "\n"
                            for q in workload.queries), encoding="utf-8")
    return path


def source_sha256() -> str:
    """The autotune package's source: a seed's cached run is stale once the search code changes."""
    root = Path(autotune.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def resumed(cache: Path | None, key: dict[str, str], compute: Callable[[], dict]) -> dict:
    """`compute()`'s result with `key`, kept in `cache`: a later call with the same key reads it back."""
    if cache is not None and cache.exists():
        saved = json.loads(cache.read_text())
        if all(saved.get(k) == v for k, v in key.items()):
            return saved
    result = {**key, **compute()}
    if cache is not None:
        write_atomic(cache, json.dumps(result))  # a run killed mid-write leaves no half a cache
    return result


def seed_run(workload: Workload, host: object, path: Path, tmp: Path, target: str, seed: int,
             cache: Path | None) -> dict:
    """One default `autotune run` (a fresh study) in a fresh process, as the CLI runs it, so its peak RSS
    is its own; or its result kept in `cache` by an earlier invocation."""

    def run() -> dict:
        out = tmp / f"run-{seed}.json"
        child = multiprocessing.get_context("spawn").Process(target=_run_in_child,
                                                             args=(path, tmp, target, seed, out))
        child.start()
        child.join()
        if child.exitcode != 0:
            raise SystemExit(f"seed {seed}: the run's process exited with {child.exitcode}")
        return json.loads(out.read_text())

    key = {"workload": workload.sha256, "host": host.fingerprint, "source": source_sha256()}  # type: ignore[attr-defined]
    return resumed(cache, key, run)


def _run_in_child(path: Path, tmp: Path, target: str, seed: int, out: Path) -> None:
    os.environ["AUTOTUNE_STATE_DIR"] = str(tmp / f"state-{seed}")  # a fresh study per seed
    opts = RunOptions(workload=path, env_file=tmp / f"{seed}.env", profile_dir=tmp / "p", name=f"seed{seed}",
                      compose_file=None, target=target, model_out=tmp / f"model-{seed}",
                      settings=SearchSettings(seed=seed))
    result = tune(opts).result
    out.write_text(json.dumps({"pick": result.winner.config.to_dict(), "measuring_s": result.measuring_s,
                               "elapsed_s": result.elapsed_s, "phases_s": result.phases_s,
                               "peak_rss_mb": process_peak_mb(),  # the rest, to tell why a pick missed
                               "refined": None if result.refined is None else result.refined.to_dict(),
                               "race": [{"config": f.config.label(), "p95_ms": f.latency.p95_ms,
                                         "rounds_ms": f.round_p95_ms} for f in result.finalists]}))


def grid(target_name: str, workload: Workload, host: object, bundle: object,
         cache: Path | None) -> tuple[object, object, float, int]:
    """The grid's best and its measuring time; kept in `cache` (by workload and host), since it takes long."""
    target = get_target(target_name)
    pool = target.pool(bundle, has_vnni=host.has_vnni, usable_cores=host.cores.usable)  # type: ignore[attr-defined]

    def measure() -> dict:
        settings = SearchSettings(halving=False)
        space = target.space(SpaceLimits(usable_cores=host.cores.usable,  # type: ignore[attr-defined]
                                         max_candidates=workload.max_candidates))
        reference = reference_scores(pool, workload, host.onnxruntime)  # type: ignore[attr-defined]
        space, _dropped, _int8 = prechecked(space, pool, workload, reference, settings.int8_tolerance)
        study = optuna.create_study(sampler=optuna.samplers.GridSampler(space.dimensions()))
        objective = Objective(pool, workload, reference, space, settings)
        started = time.monotonic()
        study.optimize(objective, n_trials=space.size())
        return {"best": best_feasible_config(study).to_dict(), "seconds": time.monotonic() - started,
                "size": space.size()}

    saved = resumed(cache, {"workload": workload.sha256, "host": host.fingerprint}, measure)  # type: ignore[attr-defined]
    return pool, EngineConfig.from_dict(saved["best"]), float(saved["seconds"]), int(saved["size"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="example,heavy,longtail")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--target", default="onnx")
    parser.add_argument("--race-rounds", type=int, default=10,
                        help="rounds of the final race: at 5 its A/A was 0.893 on heavy, at 10 0.998 on example")
    parser.add_argument("--cache", type=Path,
                        help="a folder to keep each grid's result and each seed's run in, to resume from")
    args = parser.parse_args()
    if args.cache is not None:
        args.cache.mkdir(parents=True, exist_ok=True)
    host = default_probe().probe()
    bundle = build_default_model()
    isa = ", ".join(k for k, v in host.isa.items() if v)
    print(f"host: {host.brand}, {host.cores.usable} usable cores, {isa}; onnxruntime {host.onnxruntime}")
    seeds = [int(s) for s in args.seeds.split(",")]
    totals = {"within": 0, "cheap": 0, "runs": 0, "faster_reverts": 0}
    for name in args.workloads.split(","):
        workload = WORKLOADS[name]()

        def cached(kind: str, name: str = name) -> Path | None:
            return None if args.cache is None else args.cache / f"{kind}-{name}-{args.target}.json"

        pool, best, grid_s, size = grid(args.target, workload, host, bundle, cached("grid"))
        print(f"\n[{name}] grid: {size} configurations, {grid_s:.0f} s of measuring; best {best.label()}", flush=True)
        picks: dict[int, EngineConfig] = {}
        with tempfile.TemporaryDirectory() as tmp:
            path = write_jsonl(workload, Path(tmp) / "queries.jsonl")
            for seed in seeds:  # each printed as it ends: a run cut short still shows the seeds it finished
                run = seed_run(workload, host, path, Path(tmp), args.target, seed, cached(f"seed{seed}"))
                picks[seed] = EngineConfig.from_dict(run["pick"])
                cost = run["measuring_s"] / grid_s
                totals["cheap"] += cost <= 0.30
                phases = " ".join(f"{k} {v / grid_s:.2f}" for k, v in run["phases_s"].items())
                print(f"  seed {seed}: picked {picks[seed].label()}; measuring / grid {cost:.2f} "
                      f"(wall {run['elapsed_s'] / grid_s:.2f}; {phases}); peak RSS "
                      f"{run['peak_rss_mb']:.0f} MB", flush=True)
        # each configuration as it runs here, raced once (one session timed against itself measures only
        # noise), and the grid's best once more, to measure just that
        runs = {c: pool.effective(c) for c in [best, *picks.values()]}
        configs = list(dict.fromkeys(runs.values()))
        raced = rerace(pool, workload, [*configs, runs[best]], args.race_rounds)  # the last: an A/A control
        race = {f.config: f.latency.p95_ms for f in raced[:-1]}
        aa = raced[-1].latency.p95_ms / race[runs[best]]
        print(f"  A/A: the grid's best against itself in the same race {aa:.3f} "
              "(how far apart one configuration lands: the race's own noise)", flush=True)
        for seed, pick in picks.items():
            ratio = race[runs[pick]] / race[runs[best]]
            totals["within"] += ratio <= 1.05
            totals["runs"] += 1
            print(f"  seed {seed}: p95 / grid best {ratio:.3f} (raced interleaved, {args.race_rounds} rounds)",
                  flush=True)
        baseline = get_target(args.target).space(SpaceLimits(usable_cores=host.cores.usable,
                                                             max_candidates=workload.max_candidates)).baseline()
        for config in dict.fromkeys(runs[p] for p in picks.values()):  # every pick, the grid's best too
            loo = explain(pool, workload, baseline, config, rounds=5).leave_one_out
            reverts = [s.knob for s in loo if s.ratio > 1 and s.beyond_noise]
            seeds_of = [seed for seed, pick in picks.items() if runs[pick] == config]
            totals["faster_reverts"] += len(seeds_of) if reverts else 0
            print(f"  {config.label()} (seeds {', '.join(map(str, seeds_of))}): "
                  f"faster reverts: {', '.join(reverts) or 'none'}", flush=True)
    print(f"\nwithin 5% of the grid's best: {totals['within']}/{totals['runs']}; at most 30% of the grid's time: "
          f"{totals['cheap']}/{totals['runs']}; picks with a faster revert: {totals['faster_reverts']}")


if __name__ == "__main__":
    main()
