"""The phases of `autotune run`, as functions over one run context (`tune.py` calls them in order).

prepare (no model yet: inputs, host, every output path) -> load (model, pool, fp32 reference, the
recording's self-check) -> precheck (int8 judged by its results, the fused graph; the objective) -> search
(the Optuna study) -> refine (hill-climb) -> race (finalists against Hindsight's defaults, interleaved) ->
judge (parity again, the pick, then the scope phase: how much Hindsight scores, `scoping.scope_phase`; load
and memory figures) -> commit (`outputs.commit`). `load` and `precheck` fill fields of the context that
`prepare` leaves empty: the typed hand-offs issue 45 asks for are not built yet.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna

from autotune.errors import OptionsError, WorkloadError
from autotune.hindsight.versions import parse_version
from autotune.host import HostInfo, HostProbe, default_probe, run_conditions
from autotune.outputs.commit import check_outputs, write_outputs
from autotune.outputs.envfile import read_text_exact, user_values
from autotune.outputs.profile import check_name, load_profile, profile_config, profile_path
from autotune.pipeline.options import RunOptions, RunOutcome
from autotune.pipeline.scoping import Picked, scope_phase
from autotune.runtime.engine import EngineConfig, EngineTraits, ScoringPool
from autotune.runtime.model import ModelBundle
from autotune.runtime.space import SearchSpace
from autotune.runtime.targets import SpaceLimits, Target, get_target
from autotune.search.client_sizing import hindsight_concurrency, measure_client_sizing
from autotune.search.finalists import Finalist, SearchResult, challenge, choose, finalists_from, rerace
from autotune.search.int8_judge import Int8Verdict, int8_scatter
from autotune.search.measure import Load, scores_of
from autotune.search.memory import ModelMemory, PeakRss, default_budget_mb, process_peak_mb, rss_mb
from autotune.search.memory_guard import measuring
from autotune.search.noise import NoiseSample, trustworthiness, wait_quiet
from autotune.search.objective import Objective
from autotune.search.parity import compare, fresh_reference
from autotune.search.prechecks import Dropped, prechecked
from autotune.search.refine import Refiner, RefineResult, neighbours_summary
from autotune.search.selfcheck import SelfCheck, logits_from_scores, self_check
from autotune.search.served_memory import BurstPlan, measure_served
from autotune.search.space import SearchSettings
from autotune.search.stats import NOISY_SPREAD
from autotune.search.storage import shared_lock
from autotune.search.study import best_feasible_config, open_study, trial_records
from autotune.search.trial_loop import run_study
from autotune.workload.candidate_cap import CandidateCap, apply_cap, cap_from_env
from autotune.workload.queries import Workload, load_workload

ProgressFn = Callable[[optuna.Study, optuna.trial.FrozenTrial], None]
SEARCH_SHARE = 0.6  # of --timeout: the TPE search; refinement may run until REFINE_SHARE; the re-race after
REFINE_SHARE = 0.85


@dataclass
class RunContext:
    """What the phases share. `prepare` fills the first block; `load` and `precheck` the rest."""

    opts: RunOptions
    target: Target
    host: HostInfo
    workload: Workload  # as Hindsight would see it (cut to MAX_TOKENS_PER_CANDIDATE where the .env sets it)
    source_sha256: str  # the workload file's hash, before any cut
    user_env: dict[str, str]
    cap: CandidateCap | None
    traffic: Load
    space: SearchSpace
    stage: Callable[[str], None]
    started: float
    deadline: float | None
    bundle: ModelBundle | None = None
    traits: EngineTraits | None = None
    pool: Any = None  # ScoringPool
    reference: list[np.ndarray] = field(default_factory=list)
    recording: SelfCheck | None = None
    dropped: list[Dropped] = field(default_factory=list)
    int8_considered: bool = False
    int8: Int8Verdict | None = None  # each int8 variant's results against fp32, and the one the search runs
    budget_mb: float = 0.0
    objective: Objective | None = None
    committed: dict[str, Any] | None = None  # the profile an earlier run wrote at this path (not with --fresh)

    @property
    def settings(self) -> SearchSettings:
        return self.opts.settings


@dataclass
class Searched:
    study: optuna.Study
    study_name: str
    trials: int
    resumed: int


def prepare(opts: RunOptions, *, probe: HostProbe | None = None,
            stage: Callable[[str], None] = lambda _msg: None) -> RunContext:
    """Everything that can be refused before a model loads: the workload (all of it), the target, the host,
    and every output path."""
    workload = load_workload(opts.workload)
    source_sha256 = workload.sha256
    env_text = read_text_exact(opts.env_file)
    user_env = user_values(env_text)  # never autotune's own block: caps a previous run wrote are not the user's
    cap = cap_from_env(user_env)
    if cap is not None:  # Hindsight cuts documents before the reranker: so does the replay
        workload = apply_cap(workload, cap)
    target = get_target(opts.target)
    oversized = oversized_pools(workload, user_env)
    if oversized:
        stage(oversized)
    traffic = Load(_concurrency(opts, target, user_env))
    check_hindsight_version(workload, target)
    if opts.name is not None:
        check_name(opts.name)
    host = (probe or default_probe()).probe()
    paths = opts.outputs()
    check_outputs(paths, target, paths.profile_name(host), inputs={"--workload": opts.workload, "--model": opts.model})
    space = target.space(SpaceLimits(usable_cores=host.cores.usable, max_candidates=workload.max_candidates,
                                     batch_sizes=opts.batch_sizes, precisions=opts.precisions,
                                     max_threads=opts.max_threads, concurrency=traffic.concurrency))
    settings = opts.settings
    if settings.max_memory_mb is not None and settings.max_memory_mb <= rss_mb():
        raise OptionsError(f"--max-memory {settings.max_memory_mb:.0f} MB is below what the tuner already holds "
                           f"({rss_mb():.0f} MB RSS) before any model is loaded")
    started = time.monotonic()
    deadline = None if settings.timeout_s is None else started + settings.timeout_s
    ctx = RunContext(opts, target, host, workload, source_sha256, user_env, cap, traffic, space, stage, started,
                     deadline)
    committed = profile_path(paths.profile_dir, paths.profile_name(host))
    if not opts.fresh and committed.is_file():
        try:
            ctx.committed = load_profile(committed)
        except OptionsError as exc:  # unreadable: nothing to keep; this run replaces it
            stage(f"the profile at {committed} cannot be read ({exc.message}): it is replaced, not raced")
    return ctx


def oversized_pools(workload: Workload, env: dict[str, str]) -> str | None:
    """A warning when queries hold more documents than Hindsight ever reranks per recall (MAX_CANDIDATES,
    300 unless the `.env` says otherwise): every trial then does that many times a recall's work, and a
    query of 10,000 documents once ran past 400 s without a word."""
    from autotune.hindsight.keys import MAX_CANDIDATES, pool_cap, user_caps

    caps = user_caps(env)
    sizes = [(n, len(q.documents), pool_cap(caps, q.budget)) for n, q in enumerate(workload.queries, start=1)]
    over = [(n, docs, cap) for n, docs, cap in sizes if docs > cap]
    if not over:
        return None
    n, docs, cap = max(over, key=lambda o: o[1] / o[2])
    return (f"warning: {len(over)} of {len(workload.queries)} queries hold more documents than Hindsight reranks "
            f"per recall (query #{n}: {docs} against {MAX_CANDIDATES.removeprefix('HINDSIGHT_API_RERANKER_')} "
            f"{cap}), so each trial does up to {docs / cap:.1f}x a recall's work and the search is that much "
            "slower: record the workload from Hindsight (`autotune record`), or cut each query to its first "
            f"{cap} documents")


def incumbent(ctx: RunContext, study_name: str) -> EngineConfig | None:
    """The committed profile's pick, when that profile came from this very study (same host type, model,
    workload, space and target): a rerun races it, and keeps it unless it is beaten beyond the noise."""
    committed = ctx.committed
    if committed is None or (committed.get("search") or {}).get("study") != study_name:
        return None
    config = profile_config(committed)
    return config if ctx.space.fits(config) else None


def load(ctx: RunContext) -> None:
    """The model, its pool, the fp32 reference, and whether a recording reproduces Hindsight's own scores."""
    opts, host, target = ctx.opts, ctx.host, ctx.target
    ctx.bundle = bundle = target.load_model(opts.model)
    ctx.traits = target.traits(host.cores.usable, bundle.max_length, opts.max_tokens)
    ctx.pool = target.pool(bundle, has_vnni=host.has_vnni, usable_cores=host.cores.usable, max_tokens=opts.max_tokens)
    first = ctx.workload.queries[0]  # a broken model fails here, before any progress is printed
    ctx.pool.engine(ctx.space.baseline()).score(first.query, first.documents[:2])
    ctx.stage(f"computing the fp32 reference (batch size 1, no sort, {_max_tokens(bundle, ctx.traits)} tokens)")
    ctx.reference = fresh_reference(bundle, host.has_vnni, host.onnxruntime, ctx.workload, ctx.traits.max_tokens)
    ctx.recording = self_check(ctx.workload.queries, logits_from_scores(ctx.reference))
    if ctx.recording is not None and not ctx.recording.passed and not opts.accept_mismatch:
        raise WorkloadError(f"the recording does not reproduce Hindsight's own scores: {ctx.recording.summary()} "
                            "(pass --accept-mismatch to tune on it anyway)")


def precheck(ctx: RunContext) -> None:
    """int8's parity and the fused graph, once each, so the search never tries what cannot pass; the objective."""
    ctx.stage("judging int8 by the results it keeps, and the fused graph, once before the search")
    ctx.int8_considered = "int8" in ctx.space.precisions
    ctx.space, ctx.dropped, ctx.int8 = prechecked(ctx.space, ctx.pool, ctx.workload, ctx.reference,
                                                  ctx.settings.int8_tolerance, has_vnni=ctx.host.has_vnni)
    for line in ctx.int8.lines() if ctx.int8 is not None else ():
        ctx.stage(line)
    for d in ctx.dropped:
        ctx.stage(d.line())
    ctx.budget_mb = ctx.settings.max_memory_mb or default_budget_mb()
    assert ctx.bundle is not None
    lengths = _pair_lengths(ctx.pool, ctx.workload)
    ctx.objective = Objective(ctx.pool, ctx.workload, ctx.reference, ctx.space, ctx.settings,
                              memory_budget_mb=ctx.budget_mb,
                              memory_model=_memory_model(ctx.bundle, ctx.pool, ctx.workload, lengths),
                              lengths=lengths, load=ctx.traffic)
    if ctx.settings.max_memory_mb is None:  # the default budget, not the user's: room for what they run today
        raised = ctx.objective.room_for_baseline(default_budget_mb(cap_mb=math.inf))
        if raised is not None:
            ctx.budget_mb = raised
            ctx.stage(f"memory budget raised to {raised:.0f} MB so that Hindsight's defaults, which this host runs "
                      "today, race beside the tuned configurations (pass --max-memory to hold it lower)")


def search(ctx: RunContext, store: Any, progress: ProgressFn | None = None) -> Searched:
    """The seeded Optuna study over the space (resumed where an earlier run left it)."""
    assert ctx.objective is not None and ctx.bundle is not None
    opts, settings, target = ctx.opts, ctx.settings, ctx.target
    study_name = (f"autotune-{target.name}-{ctx.host.fingerprint}-{ctx.bundle.sha256[:12]}-"
                  f"{ctx.workload.sha256[:12]}-{timed_digest(ctx)}")
    if ctx.cap is not None:
        ctx.stage(f"documents cut to {ctx.cap.max_tokens} {ctx.cap.encoding} tokens first, as the .env's "
                  "MAX_TOKENS_PER_CANDIDATE makes Hindsight do")
    study = open_study(study_name, store, settings.seed, ctx.objective.rungs, opts.fresh)

    def waiting(load: float) -> None:
        ctx.stage(f"waiting for a quiet host (load {load:.1f})")

    if opts.wait_quiet_s and not wait_quiet(ctx.host.cores.usable, opts.wait_quiet_s, on_wait=waiting):
        ctx.stage(f"the host is still busy after {opts.wait_quiet_s:.0f} s: measuring anyway, and saying so")
    trials = settings.trials_for(ctx.space)
    concurrency = ctx.traffic.concurrency
    under = "" if concurrency == 1 else f", each timed under {concurrency} concurrent recalls"
    ctx.stage(f"searching {ctx.space.size()} configurations of the `{target.name}` target with {trials} "
              f"trials{under} (study {study_name})")
    resumed = run_study(study, ctx.objective, trials, on_trial=progress, gate=lambda: shared_lock(store),
                        timeout_s=_phase_left(ctx.deadline, SEARCH_SHARE, ctx.started, settings.timeout_s))
    return Searched(study, study_name, trials, resumed)


def refine(ctx: RunContext, study: optuna.Study) -> RefineResult | None:
    """Hill-climb from the search's best feasible trial (see `refine`); None when refinement is off."""
    assert ctx.objective is not None
    settings, objective = ctx.settings, ctx.objective
    best = best_feasible_config(study)
    if best is None or settings.refine_rounds == 0:
        return None
    deadline = None if ctx.deadline is None else ctx.started + REFINE_SHARE * settings.timeout_s  # type: ignore[operator]
    ctx.stage(f"refining from {best.label()}: one knob at a time, interleaved, until none wins")
    measuring(f"the refinement from {best.label()}")
    refiner = Refiner(objective.pool, objective.workload, objective.space, objective.reference, settings.tolerance,
                      rounds=settings.refine_rounds, deadline=deadline,
                      admissible=objective.over_budget, load=objective.load,
                      fit_together=lambda configs: objective.race_fits(configs, loads=1, keep=1,
                                                                       limit_mb=objective.memory_budget_mb))
    refined = refiner.climb(best)
    for line in neighbours_summary(refined, settings.finalists - 1):  # the refined pick takes one place
        ctx.stage(line)
    return refined


def race(ctx: RunContext, study: optuna.Study, refined: RefineResult | None) -> tuple[list[Finalist], str | None]:
    """The refined pick and the best trials, re-measured interleaved with Hindsight's defaults (when those
    fit the memory budget; otherwise the reason they were left out). Finalists within the noise of the
    leader after `final_rounds` run as many again (until the deadline): a near tie is settled on twice
    the rounds, a clear result on the first ones."""
    assert ctx.objective is not None
    settings, objective = ctx.settings, ctx.objective
    space, pool, budget = objective.space, objective.pool, objective.memory_budget_mb
    skipped = objective.over_budget(space.baseline())
    if skipped:  # the budget holds for every candidate, Hindsight's defaults included (issue 37)
        ctx.stage(f"Hindsight's defaults are not raced: {skipped}; pass a larger --max-memory to compare against "
                  "them")
    configs = finalists_from(study, space, settings.finalists, with_baseline=not skipped,
                             first=None if refined is None else refined.best, same=pool.effective,
                             beaten=() if refined is None else refined.beaten(),
                             runners_up=() if refined is None else refined.runners_up())
    kept = incumbent(ctx, study.study_name)
    if kept is not None and pool.effective(kept) not in {pool.effective(c) for c in configs}:
        configs.append(kept)  # the committed pick always races on a rerun, in a place of its own
    if len(configs) == (0 if skipped else 1):  # nothing but Hindsight's defaults: no tuned candidate fits
        raise OptionsError(nothing_passed(study.get_trials(deepcopy=False), budget, space.size()))
    configs, left_out = objective.race_fits(configs, loads=len(objective.load.raced()),
                                            keep=1 if skipped else 2, limit_mb=budget)
    if left_out:
        ctx.stage(f"left out of the race, whose sessions are all held at once: {', '.join(c.label() for c in left_out)}"
                  f" (beside the others they would pass the memory budget of {budget:.0f} MB)")
    measuring(f"the race of {len(configs)} finalists ({', '.join(c.label() for c in configs)})")
    ctx.stage(f"re-measuring {len(configs)} finalists interleaved, {settings.final_rounds} rounds "
              f"(up to {2 * settings.final_rounds} for those within {NOISY_SPREAD:.0%} of the fastest)")
    finalists = rerace(pool, objective.workload, configs, settings.final_rounds, baseline_first=not skipped,
                       load=objective.load, tie_rounds=settings.final_rounds, until=ctx.deadline)
    extended = [f.config.label() for f in finalists if len(f.round_p95_ms) > settings.final_rounds]
    if extended:
        ctx.stage(f"near tie: {', '.join(extended)} ran {max(len(f.round_p95_ms) for f in finalists)} rounds")
    return finalists, skipped


def nothing_passed(trials: list[optuna.trial.FrozenTrial], budget: float, space_size: int) -> str:
    """Why no tuned configuration is left to race, counted from the trials' own reasons."""
    reasons = [str(t.user_attrs.get("rejected", "")) for t in trials]
    memory = sum("memory budget" in r for r in reasons)
    parity = [r for r in reasons if r and "memory budget" not in r]
    first = f" (the first: {parity[0]})" if parity else ""
    return (f"no configuration passed: of {len(trials)} trials (the space holds {space_size}), {memory} passed the "
            f"memory budget of {budget:.0f} MB and {len(parity)} failed the parity gate{first}; raise --trials or "
            "--max-memory, or widen --precisions and --batch-sizes")


def judge(ctx: RunContext, searched: Searched, refined: RefineResult | None, finalists: list[Finalist],
          baseline_skipped: str | None, monitor: NoiseSample,
          phases: dict[str, float]) -> tuple[SearchResult, dict[str, Any], dict[str, list[float]] | None]:
    """Parity again on the very sessions that were timed, the pick, and what the profile records of it."""
    assert ctx.objective is not None
    settings, pool, workload = ctx.settings, ctx.pool, ctx.workload
    for f in finalists:
        f.parity = compare(ctx.reference, scores_of(pool, f.config, workload), settings.tolerance(f.config.precision))
    passing = [f for f in finalists if f.parity is not None and f.parity.passed]
    if not passing and not ctx.opts.write_baseline:
        reason = finalists[0].parity.reason() if finalists[0].parity else "no parity figures"
        raise OptionsError("no configuration passed the parity gate, not even Hindsight's defaults "
                           f"({reason}): loosen the tolerances, or pass --write-baseline to write the defaults")
    winner, noise = choose(passing or finalists[:1])
    kept = incumbent(ctx, searched.study_name)
    rerun = None
    held = next((f for f in passing if kept is not None and pool.effective(f.config) == pool.effective(kept)), None)
    if held is not None:
        winner, rerun = challenge(held, winner)
        ctx.stage(f"rerun: {rerun}")
    picked = Picked(winner, None if baseline_skipped else finalists[0], finalists)
    clock = time.monotonic()
    measuring(f"the pool and token scope of {winner.config.label()}")
    scoped = scope_phase(ctx, picked, gate=ctx.opts.result_gate, tune_pool=ctx.opts.tune_pool)
    phases["scope"] = time.monotonic() - clock
    winner = picked.winner
    served_load = None
    if ctx.target.sidecar:
        served_load = _served_load(pool, winner, passing or finalists[:1], workload, ctx.user_env, ctx.traffic,
                                   ctx.stage)
    noise = monitor.warnings + noise
    int8_sample = (int8_scatter(pool, winner.config, workload, ctx.reference, ctx.int8) if ctx.int8_considered
                   else None)
    memory = served_memory(pool, winner.config, workload, ctx.objective, ctx.budget_mb, searched.study,
                           ctx.host.has_vnni, server_module=ctx.target.server_module)
    conditions = {**run_conditions(), **monitor.to_dict(),
                  "trustworthy": trustworthiness(noise, settings.final_rounds)}
    if settings.final_rounds < 2:
        conditions["note"] = "with one final round the spread cannot be judged: trustworthiness unknown (use 2 or more)"
    cap = None if ctx.cap is None else {**ctx.cap.to_dict(), "file_sha256": ctx.source_sha256}
    result = SearchResult(searched.study_name, winner, picked.baseline, finalists,
                          trial_records(searched.study), noise, searched.resumed, refined=refined,
                          dropped=ctx.dropped, memory=memory, trials_planned=searched.trials,
                          elapsed_s=time.monotonic() - ctx.started, baseline_skipped=baseline_skipped,
                          candidate_cap=cap, phases_s=phases, load=served_load,
                          concurrency=ctx.traffic.concurrency, rerun=rerun, scope=scoped)
    return result, conditions, int8_sample


def commit(ctx: RunContext, result: SearchResult, conditions: dict[str, Any],
           int8_sample: dict[str, Any] | None) -> RunOutcome:
    """Stage, check and put every output in place together (`outputs.commit`)."""
    assert ctx.bundle is not None
    opts, target, bundle = ctx.opts, ctx.target, ctx.bundle
    max_tokens = _max_tokens(bundle, target.traits(ctx.host.cores.usable, bundle.max_length, opts.max_tokens))
    written = write_outputs(opts.outputs(), target=target, result=result, host=ctx.host, bundle=bundle,
                            pool=ctx.pool, workload=ctx.workload, space=ctx.space, settings=ctx.settings,
                            conditions=conditions, int8_sample=int8_sample, recording=ctx.recording,
                            model_ref="default" if opts.model is None else str(opts.model), max_tokens=max_tokens)
    return RunOutcome(result, ctx.host, bundle, ctx.workload, written.profile_path, written.profile, written.env,
                      written.compose_path, target.name, written.model_dir, written.tokenizer_check, ctx.recording)


def check_hindsight_version(workload: Workload, target: Target) -> None:
    """A workload recorded from a Hindsight without this target's provider cannot run it."""
    for q in workload.queries:
        version = q.extra.get("hindsight_version")
        parsed = parse_version(version)
        if parsed is not None and parsed < target.min_hindsight:
            need = ".".join(map(str, target.min_hindsight))
            raise OptionsError(f"the workload was recorded from Hindsight {version}, which has no `{target.name}` "
                               f"reranker (new in {need}): use --target tei, or upgrade Hindsight")


def _concurrency(opts: RunOptions, target: Target, user_env: dict[str, str]) -> int:
    """The recalls at once each candidate is timed under: the sidecar's default is the load Hindsight's TEI
    client sends; an in-process target that can rerank several at once (onnx) is timed under what the user
    declares (default 1); one that cannot refuses more."""
    if target.sidecar:
        return opts.concurrency or hindsight_concurrency(user_env)
    if opts.concurrency not in (None, 1) and not target.concurrent:
        raise OptionsError(f"--concurrency does not apply to --target {target.name}: autotune tunes it for one "
                           "rerank at a time")
    return opts.concurrency or 1


def _served_load(pool: ScoringPool, winner: Finalist, finalists: list[Finalist], workload: Workload,
                 user_env: dict[str, str], load: Load, stage: Callable[[str], None]) -> dict[str, Any]:
    """The sidecar's figures under load, the client keys they call for, and why this pick over the
    single-query best when the two differ."""
    sizing = measure_client_sizing(pool, winner.config, workload, user_env)
    warning = sizing.unsafe(user_env)  # printed once, with the result
    alone = min(finalists, key=lambda f: (f.single or f.latency).p95_ms)
    choice = f"{winner.config.label()}: the lowest p95 under {load.concurrency} concurrent recalls"
    if load.concurrency > 1 and alone.config != winner.config:
        choice += (f"; {alone.config.label()} is faster one query at a time "
                   f"({(alone.single or alone.latency).p95_ms:.0f} ms against "
                   f"{(winner.single or winner.latency).p95_ms:.0f} ms) but slower under load "
                   f"({alone.latency.p95_ms:.0f} ms against {winner.latency.p95_ms:.0f} ms)")
    stage(f"chose {choice}")
    return {"concurrency": load.concurrency,
            "p95_ms_loaded": round(winner.latency.p95_ms, 3),
            "p95_ms_single": round((winner.single or winner.latency).p95_ms, 3),
            "throughput_pairs_per_s": {str(k): round(v, 1) for k, v in winner.throughput.items()},
            "choice": choice, "client": sizing.to_dict(), "client_keys": sizing.keys(),
            "unsafe_user_values": warning}


def _phase_left(deadline: float | None, share: float, started: float, timeout_s: float | None) -> float | None:
    if deadline is None or timeout_s is None:
        return None
    return max(0.0, started + share * timeout_s - time.monotonic())


def _memory_model(bundle: ModelBundle, pool: ScoringPool, workload: Workload,
                  lengths: list[list[int]] | None) -> ModelMemory | None:
    """The memory model, calibrated on one measured session scoring the workload's longest pair alone."""
    model = ModelMemory.from_config(bundle.config, bundle.onnx_path.stat().st_size)
    if model is None or not lengths:
        return model
    longest, q, d = max((n, q, d) for q, row in enumerate(lengths) for d, n in enumerate(row))
    query = workload.queries[q]
    config = EngineConfig(batch_size=1, intra_op_threads=1, length_sort=False, precision="fp32")
    pool.release()
    with PeakRss() as peak:
        pool.engine(config).score(query.query, [query.documents[d]])
    pool.release()
    return model.calibrated(peak.growth_mb, longest)


def _pair_lengths(pool: ScoringPool, workload: Workload) -> list[list[int]] | None:
    """Each pair's token count after truncation, for the memory estimate (None where the pool runs no ONNX)."""
    return pool.pair_lengths(workload.queries)


def served_memory(pool: ScoringPool, config: EngineConfig, workload: Workload, objective: Objective,
                  budget_mb: float, study: optuna.Study, has_vnni: bool, *, server_module: str | None
                  ) -> dict[str, Any]:
    """What the served configuration needs, measured in a fresh process: its session and largest batch on the
    workload, and every worker at once on the longest input it will be sent (`burst`, what a memory limit must
    hold); beside the estimate made before running it and the tuner's own peak."""
    served = None
    if pool.model_path(config) is not None:  # an ONNX session, whose memory a fresh process can measure
        pool.release()  # the child's peak is not the parent's to share
        served = measure_served(pool.bundle, has_vnni=has_vnni, traits=pool.traits, config=config,
                                queries=workload.queries,
                                plan=BurstPlan(objective.memory_model, budget_mb, server_module))
    estimate = objective.estimate_mb(config)
    peaks = [process_peak_mb()] + [t.user_attrs["rss_mb"] for t in study.get_trials(deepcopy=False)
                                   if "rss_mb" in t.user_attrs]
    served_mb = None if served is None else round(served.served_mb, 1)
    burst = None if served is None or served.burst is None else served.burst.to_dict()
    return {"served_mb": served_mb,
            "estimated_mb": None if estimate is None else round(estimate, 1),
            "estimate_ratio": None if not estimate or served_mb is None else round(served_mb / estimate, 3),
            "burst": burst,
            "tuner_peak_rss_mb": round(max(peaks), 1) if peaks else None,
            "budget_mb": round(budget_mb, 1),
            "note": "served_mb is the RSS that the reranker's session and its largest batch add to the process "
                    "that serves it, measured in a fresh process; burst.added_mb is what every worker at once on "
                    "the longest input adds (burst.peak_mb: that whole process): size a compose or Kubernetes "
                    "memory limit from it"}


def timed_digest(ctx: RunContext) -> str:
    """The space and every flag that changes what a trial times (the pair cut, the recalls at once, the
    documents' token cut): a study resumed under other conditions would race figures of another workload."""
    import hashlib

    assert ctx.bundle is not None and ctx.traits is not None
    timed = [ctx.space.digest(), _max_tokens(ctx.bundle, ctx.traits), ctx.traffic.concurrency,
             None if ctx.cap is None else [ctx.cap.max_tokens, ctx.cap.encoding]]
    return hashlib.sha256(repr(timed).encode()).hexdigest()[:8]


def _max_tokens(bundle: ModelBundle, traits: EngineTraits) -> int:
    return min(traits.max_tokens or bundle.max_length, bundle.max_length)


