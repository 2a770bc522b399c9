"""`autotune run` as a plain function: validate, probe, search, re-race, write outputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from autotune.fileio import check_writable, deferred_interrupts
from autotune.host import HostInfo, HostProbe, default_probe, run_conditions
from autotune.outputs.envfile import MergeResult, parse_env, read_text_exact, write_env
from autotune.outputs.profile import (
    DEFAULT_TEI_URL,
    SCHEMA,
    check_name,
    env_keys,
    now_iso,
    profile_name,
    tei_batch_size,
    versions,
    write_profile,
)
from autotune.paths import state_dir
from autotune.runlock import host_lock
from autotune.runtime.engine import REFERENCE, EngineConfig
from autotune.runtime.model import ModelBundle, resolve_model
from autotune.runtime.sessions import EnginePool
from autotune.search.finalists import SearchResult, choose, finalists_from, rerace
from autotune.search.measure import replay
from autotune.search.objective import Objective
from autotune.search.parity import compare, reference_scores
from autotune.search.space import SearchSettings, SearchSpace
from autotune.search.study import open_study, run_study, trial_records
from autotune.workload.queries import Workload, load_workload

ProgressFn = Callable[[optuna.Study, optuna.trial.FrozenTrial], None]


@dataclass(frozen=True)
class RunOptions:
    workload: Path
    model: Path | None = None
    env_file: Path = Path(".env")
    profile_dir: Path = Path("profiles")
    name: str | None = None
    storage: str | None = None
    fresh: bool = False
    settings: SearchSettings = field(default_factory=SearchSettings)
    batch_sizes: Sequence[int] | None = None
    precisions: Sequence[str] | None = None
    max_threads: int | None = None
    tei_url: str = DEFAULT_TEI_URL
    compose_file: Path | None = Path("compose.autotune.yaml")


@dataclass
class RunOutcome:
    result: SearchResult
    host: HostInfo
    bundle: ModelBundle
    workload: Workload
    profile_path: Path
    profile: dict[str, Any]
    env: MergeResult
    compose_path: Path | None



def tune(opts: RunOptions, *, probe: HostProbe | None = None, progress: ProgressFn | None = None,
         on_stage: Callable[[str], None] | None = None) -> RunOutcome:
    stage = on_stage or (lambda _msg: None)
    workload = load_workload(opts.workload)  # all of it, before anything is measured or written
    if opts.name is not None:
        check_name(opts.name)
    check_writable(opts.env_file)
    check_writable(opts.profile_dir / "x.yaml")
    if opts.compose_file is not None:
        check_writable(opts.compose_file)
    host = (probe or default_probe()).probe()
    space = SearchSpace.for_host(usable_cores=host.cores.usable, max_candidates=workload.max_candidates,
                                 batch_sizes=opts.batch_sizes, precisions=opts.precisions,
                                 max_threads=opts.max_threads)
    bundle = resolve_model(opts.model)
    settings = opts.settings
    pool = EnginePool(bundle, has_vnni=host.has_vnni)
    pool.engine(REFERENCE)  # a broken model fails here, before any progress is printed
    with host_lock(state_dir()):
        stage("computing the fp32 reference (batch size 1, no sort)")
        reference = reference_scores(pool, workload, host.onnxruntime)
        study_name = f"autotune-{host.fingerprint}-{bundle.sha256[:12]}-{workload.sha256[:12]}-{space.digest()}"
        study = open_study(study_name, opts.storage, settings.seed, settings.prune_ratio, opts.fresh)
        stage(f"searching {space.size()} configurations with {settings.trials} trials (study {study_name})")
        resumed = run_study(study, Objective(pool, workload, reference, space, settings), settings,
                            on_trial=progress)
        configs = finalists_from(study, space, settings.finalists)
        stage(f"re-measuring {len(configs)} finalists interleaved with the baseline, "
              f"{settings.final_rounds} rounds")
        finalists = rerace(pool, workload, configs, settings.final_rounds)
        for f in finalists:  # checked again on the very sessions that were timed
            f.parity = compare(reference, _scores(pool, f.config, workload), settings.tolerance(f.config.precision))
        passing = [f for f in finalists if f.parity is not None and f.parity.passed]
        winner, noise = choose(passing or finalists[:1])
        int8_sample = _int8_sample(pool, winner.config, workload, reference) if "int8" in space.precisions else None
        conditions = run_conditions()
    result = SearchResult(study_name, winner, finalists[0], finalists, trial_records(study), noise, resumed)
    return _write_outputs(opts, result, host, bundle, workload, space, conditions, int8_sample)


def _scores(pool: EnginePool, config: EngineConfig, workload: Workload) -> list[Any]:
    return replay(pool.engine(config), workload.queries, keep_scores=True).scores


def _int8_sample(pool: EnginePool, config: EngineConfig, workload: Workload, reference: list[Any],
                 limit: int = 600) -> dict[str, list[float]]:
    """Reference fp32 scores beside int8 scores (the winner's other knobs) for the report's scatter."""
    int8 = _scores(pool, replace(config, precision="int8"), workload)
    fp32 = np.concatenate(reference)
    quant = np.concatenate(int8)
    step = max(1, len(fp32) // limit)
    return {"fp32": [round(float(x), 6) for x in fp32[::step]], "int8": [round(float(x), 6) for x in quant[::step]]}


def _write_outputs(opts: RunOptions, result: SearchResult, host: HostInfo, bundle: ModelBundle,
                   workload: Workload, space: SearchSpace, conditions: dict[str, Any],
                   int8_sample: dict[str, list[float]] | None) -> RunOutcome:
    from autotune.outputs.compose import write_compose

    settings = opts.settings
    winner = result.winner
    name = opts.name or profile_name(host.brand, host.cores.usable, host.fingerprint)  # --name checked up front
    model_ref = "default" if opts.model is None else str(opts.model)
    profile = {
        "schema": SCHEMA,
        "name": name,
        "created": now_iso(),
        "host": host.to_dict(),
        "model": {"name": bundle.name, "ref": model_ref, "sha256": bundle.sha256,
                  "max_length": bundle.max_length, "trained_head": bundle.trained_head},
        "workload": workload.summary(),
        "config": winner.config.to_dict(),
        "metrics": {
            "p50_ms": round(winner.latency.p50_ms, 3),
            "p95_ms": round(winner.latency.p95_ms, 3),
            "p99_ms": round(winner.latency.p99_ms, 3),
            "baseline_p95_ms": round(result.baseline.latency.p95_ms, 3),
            "speedup_p95": round(result.speedup_p95, 4),
            "measured": "finalists and baseline re-measured interleaved in one run; per-query medians",
        },
        "parity": {**(winner.parity.to_dict() if winner.parity else {}), "int8_vs_fp32": int8_sample},
        "search": {
            "study": result.study_name,
            "sampler": f"TPESampler(seed={settings.seed})",
            "seed": settings.seed,
            "trials": len(result.trials),
            "resumed_trials": result.resumed_trials,
            "repeats": settings.repeats,
            "final_rounds": settings.final_rounds,
            "space": {"batch_size": list(space.batch_sizes), "intra_op_threads": list(space.threads),
                      "length_sort": list(space.length_sort), "precision": list(space.precisions)},
            "finalists": [{**f.config.to_dict(), "p95_ms": round(f.latency.p95_ms, 3),
                           "round_p95_ms": [round(x, 3) for x in f.round_p95_ms],
                           "baseline": f.is_baseline,
                           "parity_passed": f.parity.passed if f.parity else None} for f in result.finalists],
            "rejected": [{"number": t.number, **t.config.to_dict(), "reason": t.rejected}
                         for t in result.rejected],
            "history": [t.to_dict() for t in result.trials],
        },
        "noise": {"warnings": result.warnings, "trustworthy": not result.warnings, **conditions},
        "versions": versions(),
    }
    existing = parse_env(read_text_exact(opts.env_file))
    keys = env_keys(winner.config, model=model_ref, tei_url=opts.tei_url,
                    tei_batch_size=tei_batch_size(existing, workload.max_candidates))
    compose_path = None
    with deferred_interrupts():
        profile_path = write_profile(opts.profile_dir, name, profile)
        merge = write_env(opts.env_file, keys)
        if opts.compose_file is not None:
            compose_path = write_compose(opts.compose_file, profile_dir=opts.profile_dir, env_file=opts.env_file)
    return RunOutcome(result, host, bundle, workload, profile_path, profile, merge, compose_path)
