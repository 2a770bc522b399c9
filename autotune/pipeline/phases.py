"""The phases of `autotune run`, each a function that takes the values it needs and returns a typed one
(`handoffs.py`); `tune.py` calls them in order.

prepare (no model yet: inputs, host, every output path) -> load (model, pool, fp32 reference, the
recording's self-check) -> precheck (int8 judged by its results, the fused graph; the objective) -> search
(the Optuna study) -> refine (hill-climb) -> race (finalists against Hindsight's defaults, interleaved;
parity again; the pick) -> scope (how much Hindsight scores, `scoping.scope_phase`) -> judge (load and
memory figures, the conditions, the result) -> commit (`outputs.commit`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import optuna

from autotune.errors import NothingPassedError, OptionsError, WorkloadError
from autotune.gates.int8_judge import int8_scatter
from autotune.gates.int8_speed import SPEED_CONFIG, mean_chars, speed_sample
from autotune.gates.parity import compare, fresh_reference
from autotune.gates.prechecks import prechecked
from autotune.gates.selfcheck import logits_from_scores, self_check
from autotune.hindsight.versions import parse_version
from autotune.host import HostProbe, default_probe, run_conditions
from autotune.measure.memory import default_budget_mb, rss_mb
from autotune.measure.memory_guard import measuring, raise_budget
from autotune.measure.noise import Conditions, NoiseSample, trustworthiness, wait_quiet
from autotune.measure.stats import NOISY_SPREAD
from autotune.measure.timing import Load, scores_of, seconds_per_pair
from autotune.outputs.commit import Emitted, Pick, check_outputs, write_outputs
from autotune.outputs.envfile import read_text_exact, user_values
from autotune.outputs.profile import check_name, load_profile, profile_config, profile_path
from autotune.pipeline.budget import Costs, Plan, plan_run
from autotune.pipeline.handoffs import Checked, Judged, Loaded, Picked, Prepared, Raced, Scoped, Searched, Tuning
from autotune.pipeline.options import RunOptions, RunOutcome
from autotune.pipeline.profile_doc import build_profile
from autotune.pipeline.record import SearchResult
from autotune.pipeline.scoping import scope_phase
from autotune.runtime.engine import REFERENCE, EngineConfig, EngineTraits, ScoringPool
from autotune.runtime.model import ModelBundle
from autotune.runtime.space import SearchSpace
from autotune.runtime.targets import SpaceLimits, Target, get_target
from autotune.search.finalists import challenge, choose, finalists_from, rerace
from autotune.search.memory_report import calibrated_memory_model, memory_report
from autotune.search.objective import Objective
from autotune.search.refine import Refiner, RefineResult, neighbours_summary
from autotune.search.storage import shared_lock
from autotune.search.study import best_feasible_config, earlier_picks, open_study, trial_records, warm_start
from autotune.search.trial_loop import run_study
from autotune.search.under_load import served_load
from autotune.search.verdicts import StoredSpeed
from autotune.workload.candidate_cap import apply_cap, cap_from_env
from autotune.workload.queries import Workload, load_workload

ProgressFn = Callable[[optuna.Study, optuna.trial.FrozenTrial], None]


def prepare(opts: RunOptions, *, probe: HostProbe | None = None,
            stage: Callable[[str], None] = lambda _msg: None,
            phase: Callable[[str, float | None], None] = lambda _name, _seconds: None) -> Prepared:
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
    traffic = Load(target.load_concurrency(opts.concurrency, user_env))
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
    committed = None
    at = profile_path(paths.profile_dir, paths.profile_name(host))
    if not opts.fresh and at.is_file():
        try:
            committed = load_profile(at)
        except OptionsError as exc:  # unreadable: nothing to keep; this run replaces it
            stage(f"the profile at {at} cannot be read ({exc.message}): it is replaced, not raced")
    started = time.monotonic()
    deadline = None if settings.timeout_s is None else started + settings.timeout_s
    return Prepared(opts, target, host, workload, source_sha256, user_env, cap, traffic, space, stage, started,
                    deadline, committed, phase)


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


def incumbent(committed: dict[str, Any] | None, space: SearchSpace, study_name: str) -> EngineConfig | None:
    """The committed profile's pick, when that profile came from this very study (same host type, model,
    workload, space and target): a rerun races it, and keeps it unless it is beaten beyond the noise."""
    if committed is None or (committed.get("search") or {}).get("study") != study_name:
        return None
    config = profile_config(committed)
    return config if space.fits(config) else None


def load(run: Prepared) -> Loaded:
    """The model, its pool, the fp32 reference, and whether a recording reproduces Hindsight's own scores."""
    opts, host, target = run.opts, run.host, run.target
    bundle = target.load_model(opts.model)
    traits = target.traits(host.cores.usable, bundle.max_length, opts.max_tokens)
    pool = target.pool(bundle, has_vnni=host.has_vnni, usable_cores=host.cores.usable, max_tokens=opts.max_tokens)
    first = run.workload.queries[0]  # a broken model fails here, before any progress is printed
    pool.engine(run.space.baseline()).score(first.query, first.documents[:2])
    plan = time_plan(run, pool)  # a --timeout too short is refused here, before anything long is measured
    for line in plan.lines():
        run.stage(line)
    run.phase("reference", plan.estimated("reference"))
    run.stage(f"computing the fp32 reference (batch size 1, no sort, {_max_tokens(bundle, traits)} tokens)")
    reference = fresh_reference(bundle, host.has_vnni, host.onnxruntime, run.workload, traits.max_tokens,
                                note=run.stage)
    recording = self_check(run.workload.queries, logits_from_scores(reference))
    if recording is not None and not recording.passed and not opts.accept_mismatch:
        raise WorkloadError(f"the recording does not reproduce Hindsight's own scores: {recording.summary()} "
                            "(pass --accept-mismatch to tune on it anyway)")
    return Loaded(bundle, traits, pool, reference, recording, plan)


COST_SAMPLE_PAIRS = 96  # pairs the cost of a pair is measured on before the plan: a second or two


def time_plan(run: Prepared, pool: ScoringPool) -> Plan:
    """What a pair costs here, at a good configuration and at the reference's, on a stratified sample; then the
    plan that fits the run in --timeout (`budget.plan_run`)."""
    sampled = speed_sample(run.workload, pairs=COST_SAMPLE_PAIRS)
    sample = sampled.queries
    longer = max(1.0, mean_chars(run.workload) / max(1.0, mean_chars(sampled)))  # pairs past the sample's cut
    pool.release()  # the model check's session: making one is part of what is measured
    clock = time.monotonic()
    good = pool.engine(replace(SPEED_CONFIG, batch_size=min(SPEED_CONFIG.batch_size, run.space.batch_sizes[-1])))
    session_s = time.monotonic() - clock
    costs = Costs(pair_s=longer * seconds_per_pair(good, sample),
                  reference_pair_s=longer * seconds_per_pair(pool.engine(REFERENCE), sample),
                  pairs=sum(len(q.documents) for q in run.workload.queries), queries=len(run.workload.queries),
                  int8="int8" in run.space.precisions and pool.model_path(REFERENCE) is not None,
                  concurrency=run.traffic.concurrency, session_s=session_s)
    del good  # its session is freed with the others, and its heap given back
    pool.release()
    return plan_run(costs, run.settings, run.settings.trials_for(run.space))


def precheck(run: Prepared, loaded: Loaded, store: optuna.storages.BaseStorage) -> Checked:
    """int8's parity and the fused graph, once each, so the search never tries what cannot pass; the objective.
    int8's speed is kept in the study storage (`StoredSpeed`), so hosts sharing a study search one space."""
    run.phase("int8", None if loaded.plan is None else loaded.plan.estimated("int8"))
    run.stage("timing int8 against fp32, then judging it by the results it keeps where it is faster, and the "
              "fused graph, once before the search")
    pool = loaded.pool
    settings = loaded.plan.settings if loaded.plan is not None else run.settings
    space, dropped, int8 = prechecked(run.space, pool, run.workload, loaded.reference, settings.int8_tolerance,
                                      has_vnni=run.host.has_vnni, speed_first=run.opts.precisions is None,
                                      until=loaded.ends("int8", run.deadline),
                                      memory=StoredSpeed(store, f"{run.host.fingerprint}|{loaded.bundle.sha256}|"
                                                                f"{run.host.onnxruntime}|{loaded.traits.max_tokens}"))
    for line in int8.lines() if int8 is not None else ():
        run.stage(line)
    for d in dropped:
        run.stage(d.line())
    budget_mb = settings.max_memory_mb or default_budget_mb()
    lengths = pool.pair_lengths(run.workload.queries)
    objective = Objective(pool, run.workload, loaded.reference, space, settings, memory_budget_mb=budget_mb,
                          memory_model=calibrated_memory_model(loaded.bundle, pool, run.workload, lengths),
                          lengths=lengths, load=run.traffic,
                          max_queries=None if loaded.plan is None else loaded.plan.trial_queries)
    if settings.max_memory_mb is None:  # the default budget follows the model and the host, not a fixed 2 GB
        objective = objective.with_budget(follow_the_model(run, objective, budget_mb))
    return Checked(space, dropped, int8, "int8" in run.space.precisions, objective)


def follow_the_model(run: Prepared, objective: Objective, budget_mb: float) -> float:
    """The default budget, raised where this model's sessions at the batches tried, or Hindsight's defaults,
    need more (a 2.2 GB reranker's session alone is past the 2 GB default: issue 52), as far as the host can
    give; said either way. Where two of its sessions at once (what the pool keeps, and a race holds) would pass
    it, the pool keeps one."""
    space = objective.space
    corners = [space.baseline(), space.heaviest()]
    needed = objective.budget_for(corners)
    if needed is not None and needed > budget_mb:
        host_mb = default_budget_mb(cap_mb=math.inf)
        raised = min(needed, max(host_mb, budget_mb))
        if raised > budget_mb:
            budget_mb = raised
            model = objective.memory_model
            weights = "" if model is None else f"weights {model.resident_mb():.0f} MB as a session holds them, "
            run.stage(f"memory budget raised to {raised:.0f} MB for this model ({weights}activations at batches "
                      f"up to {space.heaviest().batch_size}, and Hindsight's defaults, which this host runs today"
                      + (")" if raised >= needed else f"; the host can give {host_mb:.0f} MB of the {needed:.0f} "
                         "MB the largest batches need: those are refused") + "; pass --max-memory to hold it lower")
    two = objective.budget_for_race(corners)
    if two is not None and two > budget_mb and objective.pool.max_sessions > 1:
        objective.pool.keep_sessions(1)
        run.stage("two sessions of this model at once would pass the memory budget: the pool keeps one at a time "
                  "(a configuration's session is made again when its turn comes)")
    return budget_mb


def search(t: Tuning, store: optuna.storages.BaseStorage, progress: ProgressFn | None = None) -> Searched:
    """The seeded Optuna study over the space (resumed where an earlier run left it)."""
    run, settings = t.prepared, t.settings
    study_name = (f"autotune-{run.target.name}-{run.host.fingerprint}-{t.loaded.bundle.sha256[:12]}-"
                  f"{run.workload.sha256[:12]}-{timed_digest(run, t.loaded, t.checked)}")
    if run.cap is not None:
        run.stage(f"documents cut to {run.cap.max_tokens} {run.cap.encoding} tokens first, as the .env's "
                  "MAX_TOKENS_PER_CANDIDATE makes Hindsight do")
    study = open_study(study_name, store, settings.seed, t.objective.rungs, run.opts.fresh)
    run.phase("search", None)  # the search has a bar of its own, by trials
    warmed = warm_start(study, t.space, warm_seeds(t, store, study_name))
    if warmed:
        run.stage(f"the search starts from {len(warmed)} known point(s): " + ", ".join(c.label() for c in warmed))

    def waiting(load: float) -> None:
        run.stage(f"waiting for a quiet host (load {load:.1f})")

    wait_s = run.opts.wait_quiet_s
    if wait_s and not wait_quiet(run.host.cores.usable, wait_s, on_wait=waiting):
        run.stage(f"the host is still busy after {wait_s:.0f} s: measuring anyway, and saying so")
    trials = settings.trials_for(t.space) if t.loaded.plan is None else t.loaded.plan.trials
    concurrency = run.traffic.concurrency
    under = "" if concurrency == 1 else f", each timed under {concurrency} concurrent recalls"
    run.stage(f"searching {t.space.size()} configurations of the `{run.target.name}` target with {trials} "
              f"trials{under} (study {study_name})")
    resumed = run_study(study, t.objective, trials, on_trial=progress, gate=lambda: shared_lock(store),
                        timeout_s=_left(t.ends("search")))
    return Searched(study, study_name, trials, resumed)


def warm_seeds(t: Tuning, store: optuna.storages.BaseStorage, study_name: str) -> list[EngineConfig]:
    """Where a new study starts: this host type's last pick (the committed profile, then other studies of this
    host type and target), then Hindsight's defaults with one knob moved (batch size first)."""
    run, space = t.prepared, t.space
    seeds: list[EngineConfig] = []
    if run.committed is not None:
        with contextlib.suppress(OptionsError):  # a committed profile's config that no longer parses seeds nothing
            seeds.append(profile_config(run.committed))
    seeds += earlier_picks(store, f"autotune-{run.target.name}-{run.host.fingerprint}-", study_name)
    baseline = space.baseline()
    near = space.neighbours(baseline)
    return seeds + sorted(near, key=lambda c: c.batch_size == baseline.batch_size)


def refine(t: Tuning, study: optuna.Study) -> RefineResult | None:
    """Hill-climb from the search's best feasible trial (see `refine`); None when refinement is off."""
    settings, objective = t.settings, t.objective
    best = best_feasible_config(study)
    if best is None or settings.refine_rounds == 0:
        return None
    deadline = t.ends("refine")
    t.begin("refine")
    t.stage(f"refining from {best.label()}: one knob at a time, interleaved, until none wins")
    measuring(f"the refinement from {best.label()}")
    refiner = Refiner(objective.pool, objective.workload, objective.space, objective.reference, settings.tolerance,
                      rounds=settings.refine_rounds, deadline=deadline,
                      admissible=objective.over_budget, load=objective.load,
                      fit_together=lambda configs: objective.race_fits(configs, loads=1, keep=1,
                                                                       limit_mb=objective.memory_budget_mb))
    refined = refiner.climb(best)
    for line in neighbours_summary(refined, settings.finalists - 1):  # the refined pick takes one place
        t.stage(line)
    return refined


def race(t: Tuning, study: optuna.Study, refined: RefineResult | None) -> Raced:
    """The refined pick and the best trials, re-measured interleaved with Hindsight's defaults (when those
    fit the memory budget; otherwise the reason they were left out). Finalists within the noise of the
    leader after `final_rounds` run as many again (until the deadline): a near tie is settled on twice
    the rounds, a clear result on the first ones. Parity is checked again on the very sessions that were
    timed, and the pick made among those that pass (a rerun keeps the committed pick unless it is beaten)."""
    settings, objective, run = t.settings, t.objective, t.prepared
    space, pool, budget = objective.space, objective.pool, t.checked.budget_mb
    t.begin("race")
    skipped = objective.over_budget(space.baseline())
    if skipped and settings.max_memory_mb is None:  # the budget bounds the pick, not what the host runs today
        raised = objective.room_for_baseline(default_budget_mb(cap_mb=math.inf))
        if raised is not None:
            raise_budget(raised)
            budget, skipped = raised, None
            t.stage(f"memory budget raised to {raised:.0f} MB for the race, so that Hindsight's defaults, which "
                    "this host runs today, race beside the pick (the pick was held to the budget)")
    if skipped:  # no speedup can be stated: say why, and what would state it
        t.stage(f"Hindsight's defaults are not raced, so no speedup over them is stated: {skipped} "
                + ("(set with --max-memory; a larger one races them)" if settings.max_memory_mb is not None else
                   "(more than this host can give the tuner)"))
    configs = finalists_from(study, space, settings.finalists, with_baseline=not skipped,
                             first=None if refined is None else refined.best, same=pool.effective,
                             beaten=() if refined is None else refined.beaten(),
                             runners_up=() if refined is None else refined.runners_up())
    kept = incumbent(run.committed, t.space, study.study_name)
    if kept is not None and pool.effective(kept) not in {pool.effective(c) for c in configs}:
        configs.append(kept)  # the committed pick always races on a rerun, in a place of its own
    if len(configs) == (0 if skipped else 1):  # nothing but Hindsight's defaults: no tuned candidate fits
        raise NothingPassedError(nothing_passed(study.get_trials(deepcopy=False), budget, space.size()))
    configs, left_out = objective.race_fits(configs, loads=len(objective.load.raced()),
                                            keep=1 if skipped else 2, limit_mb=budget)
    if left_out:
        t.stage(f"left out of the race, whose sessions are all held at once: {', '.join(c.label() for c in left_out)}"
                f" (beside the others they would pass the memory budget of {budget:.0f} MB)")
    measuring(f"the race of {len(configs)} finalists ({', '.join(c.label() for c in configs)})")
    t.stage(f"re-measuring {len(configs)} finalists interleaved, {settings.final_rounds} rounds "
            f"(up to {2 * settings.final_rounds} for those within {NOISY_SPREAD:.0%} of the fastest)")
    finalists = rerace(pool, objective.workload, configs, settings.final_rounds, baseline_first=not skipped,
                       load=objective.load, tie_rounds=settings.final_rounds, until=t.ends("race"))
    extended = [f.config.label() for f in finalists if len(f.round_p95_ms) > settings.final_rounds]
    if extended:
        t.stage(f"near tie: {', '.join(extended)} ran {max(len(f.round_p95_ms) for f in finalists)} rounds")
    finalists = [replace(f, parity=compare(t.reference, scores_of(pool, f.config, t.workload),
                                           settings.tolerance(f.config.precision))) for f in finalists]
    passing = [f for f in finalists if f.parity is not None and f.parity.passed]
    if not passing and not run.opts.write_baseline:
        reason = finalists[0].parity.reason() if finalists[0].parity else "no parity figures"
        raise NothingPassedError("no configuration passed the parity gate, not even Hindsight's defaults "
                           f"({reason}): loosen the tolerances, or pass --write-baseline to write the defaults")
    winner, noise = choose(passing or finalists[:1])
    rerun = None
    held = next((f for f in passing if kept is not None and pool.effective(f.config) == pool.effective(kept)), None)
    if held is not None:
        winner, rerun = challenge(held, winner)
        t.stage(f"rerun: {rerun}")
    return Raced(finalists, winner, noise, skipped, rerun)


def nothing_passed(trials: list[optuna.trial.FrozenTrial], budget: float, space_size: int) -> str:
    """Why no tuned configuration is left to race, counted from the trials' own reasons."""
    reasons = [str(t.user_attrs.get("rejected", "")) for t in trials]
    memory = sum("memory budget" in r for r in reasons)
    parity = [r for r in reasons if r and "memory budget" not in r]
    first = f" (the first: {parity[0]})" if parity else ""
    return (f"no configuration passed: of {len(trials)} trials (the space holds {space_size}), {memory} went over the "
            f"memory budget of {budget:.0f} MB and {len(parity)} failed the parity gate{first}; raise --trials or "
            "--max-memory, or widen --precisions and --batch-sizes")


def scope(t: Tuning, raced: Raced) -> Scoped:
    """How much Hindsight scores: the pool caps and the token cut that keep the results (`scoping`)."""
    t.begin("scope")
    measuring(f"the pool and token scope of {raced.winner.config.label()}")
    picked = Picked(raced.winner, None if raced.baseline_skipped else raced.finalists[0], raced.finalists)
    return scope_phase(t, picked, gate=t.prepared.opts.result_gate, tune_pool=t.prepared.opts.tune_pool)


def judge(t: Tuning, searched: Searched, refined: RefineResult | None, raced: Raced, scoped: Scoped,
          monitor: NoiseSample, phases: dict[str, float]) -> Judged:
    """What the profile records of the pick: its load and memory figures, int8's scatter, the conditions."""
    settings, pool, workload, run, checked = t.settings, t.pool, t.workload, t.prepared, t.checked
    t.begin("commit")
    winner = scoped.winner
    served, server = None, run.target.served_by()
    if server is not None:  # Hindsight's TEI client calls it: its figures under load size the client's keys
        served = served_load(pool, winner, raced.passing or raced.finalists[:1], workload, run.user_env,
                             run.traffic)
        run.stage(f"chose {served.choice}")
    noise = monitor.warnings + raced.noise
    judged = checked.int8_considered and (checked.int8 is None or bool(checked.int8.reports))
    int8_sample = (int8_scatter(pool, winner.config, workload, t.reference, checked.int8) if judged
                   else None if checked.int8 is None else {"judged": checked.int8.to_dict()})
    memory = memory_report(pool, winner.config, workload, t.objective, checked.budget_mb, searched.study,
                           run.host.has_vnni, server_module=server)
    conditions = Conditions(run_conditions(), monitor, trustworthiness(noise, settings.final_rounds),
                            note=None if settings.final_rounds >= 2 else
                            "with one final round the spread cannot be judged: trustworthiness unknown (use 2 or "
                            "more)")
    cap = None if run.cap is None else {**run.cap.to_dict(), "file_sha256": run.source_sha256}
    result = SearchResult(searched.study_name, winner, scoped.baseline, raced.finalists,
                          trial_records(searched.study), noise, searched.resumed, refined=refined,
                          dropped=checked.dropped, memory=memory, trials_planned=searched.trials,
                          elapsed_s=time.monotonic() - run.started, baseline_skipped=raced.baseline_skipped,
                          candidate_cap=cap, phases_s=phases, load=served,
                          concurrency=run.traffic.concurrency, rerun=raced.rerun, scope=scoped.outcome,
                          plan=None if t.loaded.plan is None else t.loaded.plan.to_dict())
    return Judged(result, conditions, int8_sample)


def commit(t: Tuning, judged: Judged) -> RunOutcome:
    """Stage, check and put every output in place together (`outputs.commit`)."""
    run, loaded = t.prepared, t.loaded
    opts, target, bundle = run.opts, run.target, loaded.bundle
    result, max_tokens = judged.result, _max_tokens(bundle, loaded.traits)
    model_ref = "default" if opts.model is None else str(opts.model)
    pick = Pick(result.winner.config, scope_keys={} if result.scope is None else result.scope.env_keys(),
                client_keys={} if result.load is None else result.load.client_keys,
                served_max_length=None if result.memory is None else result.memory.served_max_length())

    def describe(emitted: Emitted) -> dict[str, Any]:
        return build_profile(emitted, target=target, result=result, host=run.host, bundle=bundle,
                             model_ref=model_ref, workload=run.workload, space=t.space, settings=t.settings,
                             conditions=judged.conditions, int8_sample=judged.int8_sample, max_tokens=max_tokens,
                             recording_check=None if loaded.recording is None else loaded.recording.to_dict())

    written = write_outputs(opts.outputs(), target=target, pick=pick, host=run.host, bundle=bundle, pool=loaded.pool,
                            workload=run.workload, model_ref=model_ref, max_tokens=max_tokens, describe=describe)
    return RunOutcome(judged.result, run.host, bundle, run.workload, written.profile_path, written.profile,
                      written.env, written.compose_path, target.name, written.model_dir, written.tokenizer_check,
                      loaded.recording)


def check_hindsight_version(workload: Workload, target: Target) -> None:
    """A workload recorded from a Hindsight without this target's provider cannot run it."""
    for q in workload.queries:
        version = q.extra.get("hindsight_version")
        parsed = parse_version(version)
        missing = None if parsed is None else target.missing_in(parsed)
        if missing is not None:
            raise OptionsError(f"the workload was recorded from Hindsight {version}, {missing}: use --target tei, "
                               "or upgrade Hindsight")


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def timed_digest(run: Prepared, loaded: Loaded, checked: Checked) -> str:
    """The space and every flag that changes what a trial times (the pair cut, the recalls at once, the
    documents' token cut, the int8 variant the pre-check chose): a study resumed under other conditions would
    race figures of another workload, or of another int8 graph."""
    import hashlib

    chosen = None if checked.int8 is None or checked.int8.chosen is None else checked.int8.chosen.tag()
    sampled = None if loaded.plan is None or loaded.plan.trial_queries >= len(run.workload.queries) else (
        loaded.plan.trial_queries)  # a trial's p95 over a sample of the queries is another figure
    timed = [checked.space.digest(), _max_tokens(loaded.bundle, loaded.traits), run.traffic.concurrency,
             None if run.cap is None else [run.cap.max_tokens, run.cap.encoding], chosen]
    if sampled is not None:
        timed.append(sampled)
    return hashlib.sha256(repr(timed).encode()).hexdigest()[:8]


def _max_tokens(bundle: ModelBundle, traits: EngineTraits) -> int:
    return min(traits.max_tokens or bundle.max_length, bundle.max_length)


