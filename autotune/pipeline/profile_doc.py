"""What a profile says: built from a run's record and what the commit staged, with hashes and counts of the
workload, never its text. `outputs` renders and writes it; what goes in it is the pipeline's to say."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autotune.outputs.profile import SCHEMA, now_iso, versions

if TYPE_CHECKING:
    from autotune.host import HostInfo
    from autotune.measure.noise import Conditions
    from autotune.outputs.commit import Emitted
    from autotune.pipeline.record import SearchResult
    from autotune.runtime.model import ModelBundle
    from autotune.runtime.space import SearchSpace
    from autotune.runtime.targets import Target
    from autotune.search.space import SearchSettings
    from autotune.workload.queries import Workload


def build_profile(emitted: Emitted, *, target: Target, result: SearchResult, host: HostInfo, bundle: ModelBundle,
                  model_ref: str, workload: Workload, space: SearchSpace, settings: SearchSettings,
                  conditions: Conditions, int8_sample: dict[str, Any] | None, max_tokens: int,
                  recording_check: dict[str, Any] | None = None) -> dict[str, Any]:
    winner = result.winner
    return {
        "schema": SCHEMA,
        "name": emitted.name,
        "created": now_iso(),
        "target": target.name,
        "host": host.to_dict(),
        "model": {"name": bundle.name, "ref": model_ref, "sha256": bundle.sha256,
                  "max_length": bundle.max_length, "max_tokens": max_tokens, **bundle.scoring_fields(),
                  "dir": emitted.model_dir, "emitted_sha256": emitted.emitted_sha256, "files": emitted.model_files,
                  "path_in_container": emitted.model_path_in_container,
                  # which int8 graph the emitted model is, so that `apply` rebuilds the same one
                  "int8_variant": (int8_sample or {}).get("variant") if winner.config.precision == "int8" else None,
                  "tokenizer_check": emitted.tokenizer_check},
        "workload": {**workload.summary(), "self_check": recording_check, "candidate_cap": result.candidate_cap},
        "config": winner.config.to_dict(),
        "env": emitted.env_keys,
        "metrics": {
            "p50_ms": round(winner.latency.p50_ms, 3),
            "p95_ms": round(winner.latency.p95_ms, 3),
            "p99_ms": round(winner.latency.p99_ms, 3),
            "baseline_p95_ms": None if result.baseline is None else round(result.baseline.latency.p95_ms, 3),
            "speedup_p95": None if result.speedup_p95 is None else round(result.speedup_p95, 4),
            "baseline_skipped": result.baseline_skipped,
            "measured": "finalists and baseline re-measured interleaved in one run; per-query medians",
        },
        "memory": None if result.memory is None else result.memory.to_dict(),
        "scope": None if result.scope is None else result.scope.to_dict(),
        "load": None if result.load is None else result.load.to_dict(),
        "parity": {**(winner.parity.to_dict() if winner.parity else {}), "int8_vs_fp32": int8_sample},
        "search": {
            "study": result.study_name,
            "sampler": f"TPESampler(seed={settings.seed})",
            "seed": settings.seed,
            "trials": sum(t.state != "fail" and not t.unmeasured for t in result.trials),
            "refused_before_measuring": sum(t.unmeasured for t in result.trials),  # cores or memory: no trial spent
            "trials_planned": result.trials_planned,
            "pruned_trials": sum(t.state == "pruned" for t in result.trials),
            "pruner": "SuccessiveHalvingPruner over the workload's queries (reduction factor 2)",
            "resumed_trials": result.resumed_trials,
            "elapsed_s": round(result.elapsed_s, 1),
            "measuring_s": {k: round(v, 1) for k, v in result.phases_s.items()},  # every phase's wall time
            "plan": result.plan,
            "concurrency": result.concurrency,  # recalls at once every p95 here was measured under
            "dropped": [d.to_dict() for d in result.dropped],
            "refinement": None if result.refined is None else result.refined.to_dict(),
            "repeats": settings.repeats,
            "final_rounds": settings.final_rounds,
            "space": space.dimensions(),
            "finalists": [{**f.config.to_dict(), "p95_ms": round(f.latency.p95_ms, 3),
                           "round_p95_ms": [round(x, 3) for x in f.round_p95_ms],
                           "baseline": f.is_baseline,
                           "parity_passed": f.parity.passed if f.parity else None} for f in result.finalists],
            "rejected": [{"number": t.number, **t.config.to_dict(), "reason": t.rejected}
                         for t in result.rejected],
            "history": [t.to_dict() for t in result.trials],
        },
        "noise": {"warnings": result.warnings, **conditions.to_dict()},  # conditions carry `trustworthy`
        "versions": versions(),
    }
