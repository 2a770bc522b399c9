"""`autotune run` as a plain function: validate, probe, search, re-race, write outputs.

The target (`onnx`, `tei`, `local`) decides how candidates score and which keys are written;
everything else (storage, resume, parity, pruning, finalists) is the same for all of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from autotune.errors import OptionsError, WorkloadError
from autotune.fileio import StagedFiles, check_writable, deferred_interrupts
from autotune.host import HostInfo, HostProbe, default_probe, run_conditions
from autotune.outputs.envfile import MergeResult, check_value, merge_env, parse_env, read_text_exact, user_values
from autotune.outputs.model_dir import StagedModel, TokenizerCheck, check_tokenizer, stage_model_dir
from autotune.outputs.ownership import check_compose_out, check_model_out, check_profile_out, refuse_collisions
from autotune.outputs.profile import (
    DEFAULT_TEI_URL,
    check_name,
    profile_name,
    profile_path,
    render_profile,
    tei_batch_size,
)
from autotune.paths import state_dir
from autotune.runlock import host_lock
from autotune.runtime.backends import inspect_graph
from autotune.runtime.engine import EngineConfig, EngineTraits, ScoringPool
from autotune.runtime.model import ModelBundle, resolve_model
from autotune.runtime.sessions import EnginePool
from autotune.runtime.targets import DEFAULT_TARGET, EnvContext, SpaceLimits, Target, get_target
from autotune.runtime.tokenize import PairTokenizer
from autotune.search.client_sizing import hindsight_concurrency, measure_client_sizing
from autotune.search.finalists import Finalist, SearchResult, choose, finalists_from, rerace
from autotune.search.measure import Load, replay
from autotune.search.memory import ModelMemory, default_budget_mb, process_peak_mb, rss_mb
from autotune.search.noise import LoadMonitor, trustworthiness, wait_quiet
from autotune.search.objective import Objective
from autotune.search.parity import compare, reference_scores
from autotune.search.prechecks import prechecked
from autotune.search.refine import Refiner, RefineResult, neighbours_summary
from autotune.search.served_memory import measure_served
from autotune.search.space import SearchSettings, SearchSpace
from autotune.search.stats import NOISY_SPREAD
from autotune.search.study import (
    best_feasible_config,
    open_storage,
    open_study,
    run_study,
    shared_lock,
    trial_records,
)
from autotune.workload.candidate_cap import apply_cap, cap_from_env
from autotune.workload.hindsight_versions import parse_version
from autotune.workload.queries import Workload, load_workload
from autotune.workload.selfcheck import SelfCheck, logits_from_scores, self_check

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
    target: str = DEFAULT_TARGET
    model_out: Path | None = None  # default: models/<profile name>, beside the profile directory
    model_path_in_container: str | None = None
    accept_mismatch: bool = False  # tune on a recording that does not reproduce Hindsight's own scores
    wait_quiet_s: float = 0.0  # wait up to this long for the load to fall before measuring
    write_baseline: bool = False  # when nothing passes parity, write Hindsight's defaults instead of nothing
    max_tokens: int | None = None  # the onnx target's ONNX_MAX_TOKENS (default: 512 or the model's limit)
    concurrency: int | None = None  # tei: recalls at once to tune under (default: Hindsight's TEI_MAX_CONCURRENT)


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
    target: str = DEFAULT_TARGET
    model_dir: Path | None = None
    tokenizer_check: TokenizerCheck | None = None
    recording_check: SelfCheck | None = None


def check_hindsight_version(workload: Workload, target: Target) -> None:
    """A workload recorded from a Hindsight without this target's provider cannot run it."""
    for q in workload.queries:
        version = q.extra.get("hindsight_version")
        parsed = parse_version(version)
        if parsed is not None and parsed < target.min_hindsight:
            need = ".".join(map(str, target.min_hindsight))
            raise OptionsError(f"the workload was recorded from Hindsight {version}, which has no `{target.name}` "
                               f"reranker (new in {need}): use --target tei, or upgrade Hindsight")



def model_out_dir(opts: RunOptions, name: str) -> Path:
    return opts.model_out if opts.model_out is not None else Path(opts.profile_dir).parent / "models" / name


def tune(opts: RunOptions, *, probe: HostProbe | None = None, progress: ProgressFn | None = None,
         on_stage: Callable[[str], None] | None = None) -> RunOutcome:
    stage = on_stage or (lambda _msg: None)
    workload = load_workload(opts.workload)  # all of it, before anything is measured or written
    source_sha256 = workload.sha256
    env_text = read_text_exact(opts.env_file)
    user_env = user_values(env_text)
    cap = cap_from_env(parse_env(env_text))
    if cap is not None:  # Hindsight cuts documents before the reranker: so does the replay
        workload = apply_cap(workload, cap)
    target = get_target(opts.target)
    traffic = Load(_concurrency(opts, target, user_env))
    check_hindsight_version(workload, target)
    if opts.name is not None:
        check_name(opts.name)
    host = (probe or default_probe()).probe()
    _check_outputs(opts, target, _profile_name(opts, host))
    space = target.space(SpaceLimits(usable_cores=host.cores.usable, max_candidates=workload.max_candidates,
                                     batch_sizes=opts.batch_sizes, precisions=opts.precisions,
                                     max_threads=opts.max_threads))
    settings = opts.settings
    if settings.max_memory_mb is not None and settings.max_memory_mb <= rss_mb():
        raise OptionsError(f"--max-memory {settings.max_memory_mb:.0f} MB is below what the tuner already holds "
                           f"({rss_mb():.0f} MB RSS) before any model is loaded")
    started = time.monotonic()
    deadline = None if settings.timeout_s is None else started + settings.timeout_s
    with host_lock(state_dir()):  # before the model loads: a second run refuses at once
        store = open_storage(opts.storage, fresh=opts.fresh)
        bundle = resolve_model(opts.model, stock=target.stock_default)
        traits = target.traits(host.cores.usable, bundle.max_length, opts.max_tokens)
        pool = target.pool(bundle, has_vnni=host.has_vnni, usable_cores=host.cores.usable, max_tokens=opts.max_tokens)
        first = workload.queries[0]  # a broken model fails here, before any progress is printed
        pool.engine(space.baseline()).score(first.query, first.documents[:2])
        stage(f"computing the fp32 reference (batch size 1, no sort, {_max_tokens(bundle, traits)} tokens)")
        reference = _reference(bundle, host, workload, traits)
        recording = self_check(workload.queries, logits_from_scores(reference))
        if recording is not None and not recording.passed and not opts.accept_mismatch:
            raise WorkloadError(f"the recording does not reproduce Hindsight's own scores: {recording.summary()} "
                                "(pass --accept-mismatch to tune on it anyway)")
        stage("checking int8 parity and the fused graph once, before the search")
        int8_considered = "int8" in space.precisions
        space, dropped = prechecked(space, pool, workload, reference, settings.int8_tolerance)
        for d in dropped:
            stage(d.line())
        budget_mb = settings.max_memory_mb or default_budget_mb()
        objective = Objective(pool, workload, reference, space, settings, memory_budget_mb=budget_mb,
                              memory_model=_memory_model(bundle), lengths=_pair_lengths(pool, workload), load=traffic)
        study_name = (f"autotune-{target.name}-{host.fingerprint}-{bundle.sha256[:12]}-{workload.sha256[:12]}-"
                      f"{space.digest()}")
        if cap is not None:
            stage(f"documents cut to {cap.max_tokens} {cap.encoding} tokens first, as the .env's "
                  "MAX_TOKENS_PER_CANDIDATE makes Hindsight do")
        study = open_study(study_name, store, settings.seed, objective.rungs, opts.fresh)
        def waiting(load: float) -> None:
            stage(f"waiting for a quiet host (load {load:.1f})")

        if opts.wait_quiet_s and not wait_quiet(host.cores.usable, opts.wait_quiet_s, on_wait=waiting):
            stage(f"the host is still busy after {opts.wait_quiet_s:.0f} s: measuring anyway, and saying so")
        trials = settings.trials_for(space)
        under = "" if traffic.concurrency == 1 else f", each timed under {traffic.concurrency} concurrent recalls"
        stage(f"searching {space.size()} configurations of the `{target.name}` target with {trials} "
              f"trials{under} (study {study_name})")
        with LoadMonitor(host.cores.usable) as monitor:
            clock = time.monotonic()
            resumed = run_study(study, objective, trials, on_trial=progress, gate=lambda: shared_lock(store),
                                timeout_s=_phase_left(deadline, SEARCH_SHARE, started, settings.timeout_s))
            phases = {"search": time.monotonic() - clock}
            clock = time.monotonic()
            refined = _refine(study, objective, settings, stage,
                              None if deadline is None else started + REFINE_SHARE * settings.timeout_s)
            phases["refine"], clock = time.monotonic() - clock, time.monotonic()
            finalists, baseline_skipped = _race(study, objective, settings, stage, refined, deadline)
            phases["race"] = time.monotonic() - clock
        load = monitor.result()
        for f in finalists:  # checked again on the very sessions that were timed
            f.parity = compare(reference, _scores(pool, f.config, workload), settings.tolerance(f.config.precision))
        passing = [f for f in finalists if f.parity is not None and f.parity.passed]
        if not passing and not opts.write_baseline:
            reason = finalists[0].parity.reason() if finalists[0].parity else "no parity figures"
            raise OptionsError("no configuration passed the parity gate, not even Hindsight's defaults "
                               f"({reason}): loosen the tolerances, or pass --write-baseline to write the defaults")
        winner, noise = choose(passing or finalists[:1])
        served_load = None
        if target.sidecar:
            served_load = _served_load(pool, winner, passing or finalists[:1], workload, user_env, traffic, stage)
        noise = load.warnings + noise
        if settings.final_rounds < 2:
            noise_note = "with one final round the spread cannot be judged: trustworthiness unknown (use 2 or more)"
        else:
            noise_note = None
        int8_sample = _int8_sample(pool, winner.config, workload, reference) if int8_considered else None
        memory = served_memory(pool, winner.config, workload, objective, budget_mb, study, host.has_vnni)
        conditions = {**run_conditions(), **load.to_dict(),
                      "trustworthy": trustworthiness(noise, settings.final_rounds)}
        if noise_note:
            conditions["note"] = noise_note
    result = SearchResult(study_name, winner, None if baseline_skipped else finalists[0], finalists,
                          trial_records(study), noise, resumed, refined=refined, dropped=dropped, memory=memory,
                          trials_planned=trials, elapsed_s=time.monotonic() - started,
                          baseline_skipped=baseline_skipped,
                          candidate_cap=None if cap is None else {**cap.to_dict(), "file_sha256": source_sha256},
                          phases_s=phases, load=served_load)
    return _write_outputs(opts, target, result, host, bundle, pool, workload, space, conditions, int8_sample,
                          recording)


SEARCH_SHARE = 0.6  # of --timeout: the TPE search; refinement may run until REFINE_SHARE; the re-race after
REFINE_SHARE = 0.85


def _refine(study: optuna.Study, objective: Objective, settings: SearchSettings, stage: Callable[[str], None],
            deadline: float | None) -> RefineResult | None:
    """Hill-climb from the search's best feasible trial (see `refine`); None when refinement is off."""
    best = best_feasible_config(study)
    if best is None or settings.refine_rounds == 0:
        return None
    stage(f"refining from {best.label()}: one knob at a time, interleaved, until none wins")
    refiner = Refiner(objective.pool, objective.workload, objective.space, objective.reference, settings.tolerance,
                      rounds=settings.refine_rounds, deadline=deadline,
                      admissible=objective.over_budget, load=objective.load)
    refined = refiner.climb(best)
    for line in neighbours_summary(refined):
        stage(line)
    return refined


def _race(study: optuna.Study, objective: Objective, settings: SearchSettings, stage: Callable[[str], None],
          refined: RefineResult | None, deadline: float | None) -> tuple[list[Finalist], str | None]:
    """The refined pick and the best trials, re-measured interleaved with Hindsight's defaults (when those
    fit the memory budget; otherwise the reason they were left out). Finalists within the noise of the
    leader after `final_rounds` run as many again (until the deadline): a near tie is settled on twice
    the rounds, a clear result on the first ones."""
    space, pool, budget = objective.space, objective.pool, objective.memory_budget_mb
    skipped = objective.over_budget(space.baseline())
    if skipped:
        stage(f"Hindsight's defaults are not raced: {skipped}")
    configs = finalists_from(study, space, settings.finalists, with_baseline=not skipped,
                             first=None if refined is None else refined.best, same=pool.effective,
                             beaten=() if refined is None else refined.beaten(),
                             runners_up=() if refined is None else refined.runners_up())
    if not configs:
        raise OptionsError(f"no configuration fits the memory budget of {budget:.0f} MB: raise --max-memory, "
                           "or lower --max-tokens or --batch-sizes")
    stage(f"re-measuring {len(configs)} finalists interleaved, {settings.final_rounds} rounds "
          f"(up to {2 * settings.final_rounds} for those within {NOISY_SPREAD:.0%} of the fastest)")
    finalists = rerace(pool, objective.workload, configs, settings.final_rounds, baseline_first=not skipped,
                       load=objective.load, tie_rounds=settings.final_rounds, until=deadline)
    extended = [f.config.label() for f in finalists if len(f.round_p95_ms) > settings.final_rounds]
    if extended:
        stage(f"near tie: {', '.join(extended)} ran {max(len(f.round_p95_ms) for f in finalists)} rounds")
    return finalists, skipped


def _concurrency(opts: RunOptions, target: Target, user_env: dict[str, str]) -> int:
    """The sidecar is tuned under the load Hindsight sends; the in-process targets serve one rerank at a time."""
    if not target.sidecar:
        if opts.concurrency not in (None, 1):
            raise OptionsError("--concurrency applies to --target tei (the sidecar): Hindsight's in-process "
                               "providers rerank one recall at a time")
        return 1
    return opts.concurrency or hindsight_concurrency(user_env)


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


def _memory_model(bundle: ModelBundle) -> ModelMemory | None:
    return ModelMemory.from_config(bundle.config, bundle.onnx_path.stat().st_size)


def _pair_lengths(pool: ScoringPool, workload: Workload) -> list[list[int]] | None:
    """Each pair's token count after truncation, for the memory estimate (None where the pool runs no ONNX)."""
    return pool.pair_lengths(workload.queries)


def served_memory(pool: ScoringPool, config: EngineConfig, workload: Workload, objective: Objective,
                  budget_mb: float, study: optuna.Study, has_vnni: bool) -> dict[str, Any]:
    """What the served configuration needs (its session and largest batch, measured alone in a fresh
    process), beside the estimate made before running it and the tuner's own peak."""
    served = None
    if pool.model_path(config) is not None:  # an ONNX session, whose memory a fresh process can measure
        pool.release()  # the child's peak is not the parent's to share
        served = measure_served(pool.bundle, has_vnni=has_vnni, traits=pool.traits, config=config,
                                queries=workload.queries)
    estimate = objective.estimate_mb(config)
    peaks = [process_peak_mb()] + [t.user_attrs["rss_mb"] for t in study.get_trials(deepcopy=False)
                                   if "rss_mb" in t.user_attrs]
    served_mb = None if served is None else round(served.served_mb, 1)
    return {"served_mb": served_mb,
            "estimated_mb": None if estimate is None else round(estimate, 1),
            "estimate_ratio": None if not estimate or served_mb is None else round(served_mb / estimate, 3),
            "tuner_peak_rss_mb": round(max(peaks), 1) if peaks else None,
            "budget_mb": round(budget_mb, 1),
            "note": "served_mb is the RSS that the reranker's session and its largest batch add to the process "
                    "that serves it, measured in a fresh process: add it to that process's own footprint for a "
                    "compose or Kubernetes memory limit"}


def _profile_name(opts: RunOptions, host: HostInfo) -> str:
    return opts.name or profile_name(host.brand, host.cores.usable, host.fingerprint)


def _compose_out(opts: RunOptions, target: Target) -> Path | None:
    """The override is written for the sidecar, or for an in-process target that names its container path."""
    if opts.compose_file is None or not (target.sidecar or opts.model_path_in_container):
        return None
    return opts.compose_file


def _check_outputs(opts: RunOptions, target: Target, name: str) -> None:
    """Every output must be writable, autotune's own or new, and no input of this run, and the `.env` block
    intact, before anything is measured."""
    if opts.model_path_in_container is not None and not opts.model_path_in_container.startswith("/"):
        raise OptionsError(f"--model-path-in-container must be an absolute path, got {opts.model_path_in_container!r}")
    check_value("--tei-url", opts.tei_url)  # both end up in .env values: one line each, checked now
    if opts.model_path_in_container is not None:
        check_value("--model-path-in-container", opts.model_path_in_container)
    profile = profile_path(opts.profile_dir, name)
    compose = _compose_out(opts, target)
    model_out = model_out_dir(opts, name) if target.emits_model else None
    refuse_collisions({"--workload": opts.workload, "--model": opts.model},
                      {"--env-file": opts.env_file, "the profile": profile, "--compose-file": compose,
                       "--model-out": model_out}, model_out=model_out)
    check_writable(opts.env_file)
    merge_env(read_text_exact(opts.env_file), {})  # a damaged block fails now, not after the search
    check_writable(profile)
    check_profile_out(profile)
    if compose is not None:
        check_writable(compose)
        check_compose_out(compose)
    if model_out is not None:
        check_model_out(model_out)
        check_writable(model_out.parent / "x")


def _max_tokens(bundle: ModelBundle, traits: EngineTraits) -> int:
    return min(traits.max_tokens or bundle.max_length, bundle.max_length)


def _reference(bundle: ModelBundle, host: HostInfo, workload: Workload, traits: EngineTraits) -> list[np.ndarray]:
    """fp32 at batch size 1 with no sort, truncated as the target truncates; its session is freed after."""
    pool = EnginePool(bundle, has_vnni=host.has_vnni, traits=EngineTraits(max_tokens=traits.max_tokens),
                      max_sessions=1)
    return reference_scores(pool, workload, host.onnxruntime)


def _scores(pool: ScoringPool, config: EngineConfig, workload: Workload) -> list[Any]:
    return replay(pool.engine(config), workload.queries, keep_scores=True).scores


def _int8_sample(pool: ScoringPool, config: EngineConfig, workload: Workload, reference: list[Any],
                 limit: int = 600) -> dict[str, list[float]]:
    """Reference fp32 scores beside int8 scores (the winner's other knobs) for the report's scatter."""
    int8 = _scores(pool, replace(config, precision="int8"), workload)
    fp32 = np.concatenate(reference)
    quant = np.concatenate(int8)
    step = max(1, len(fp32) // limit)
    return {"fp32": [round(float(x), 6) for x in fp32[::step]], "int8": [round(float(x), 6) for x in quant[::step]]}


def _stage_model(opts: RunOptions, target: Target, bundle: ModelBundle, pool: ScoringPool, winner: EngineConfig,
                 workload: Workload, name: str, max_tokens: int) -> tuple[StagedModel, TokenizerCheck]:
    """The directory Hindsight will load, checked token for token before it is put in place."""
    torch_dir = pool.checkpoint
    onnx_file = pool.model_path(winner) or bundle.onnx_path
    input_names = inspect_graph(bundle.onnx_path)[0]
    staged = stage_model_dir(model_out_dir(opts, name), onnx_file=onnx_file, source_dir=bundle.directory,
                             input_names=input_names, max_tokens=max_tokens, owner=name, torch_dir=torch_dir)
    try:
        tokenizer = PairTokenizer(bundle.tokenizer_path, max_tokens)
        expected = [[{"input_ids": e.ids, "token_type_ids": e.type_ids, "attention_mask": [1] * len(e.ids)}
                     for e in tokenizer.encode(q.query, q.documents)] for q in workload.queries]
        check = check_tokenizer(staged.staging, [(q.query, q.documents) for q in workload.queries], expected,
                                max_tokens, input_names)
    except BaseException:
        staged.discard()
        raise
    return staged, check


def _write_outputs(opts: RunOptions, target: Target, result: SearchResult, host: HostInfo, bundle: ModelBundle,
                   pool: ScoringPool, workload: Workload, space: SearchSpace, conditions: dict[str, Any],
                   int8_sample: dict[str, list[float]] | None, recording: SelfCheck | None) -> RunOutcome:
    winner = result.winner
    name = _profile_name(opts, host)  # --name checked up front
    model_ref = "default" if opts.model is None else str(opts.model)
    max_tokens = _max_tokens(bundle, target.traits(host.cores.usable, bundle.max_length, opts.max_tokens))
    staged, check, model_dir = None, None, None
    if target.emits_model:
        staged, check = _stage_model(opts, target, bundle, pool, winner.config, workload, name, max_tokens)
        model_dir = model_out_dir(opts, name)
    try:
        return _commit_outputs(opts, target, result, host, bundle, workload, space, conditions, int8_sample, recording,
                               name=name, model_ref=model_ref, max_tokens=max_tokens, staged=staged, check=check,
                               model_dir=model_dir)
    finally:
        if staged is not None:
            staged.discard()  # a no-op once committed; otherwise nothing half-made is left beside it


def _commit_outputs(opts: RunOptions, target: Target, result: SearchResult, host: HostInfo, bundle: ModelBundle,
                    workload: Workload, space: SearchSpace, conditions: dict[str, Any],
                    int8_sample: dict[str, list[float]] | None, recording: SelfCheck | None, *, name: str,
                    model_ref: str, max_tokens: int, staged: StagedModel | None, check: TokenizerCheck | None,
                    model_dir: Path | None) -> RunOutcome:
    """Build the keys and the profile, stage every file, then put the model directory and the files in place."""
    from autotune.outputs.compose import render_compose
    from autotune.outputs.profile_doc import build_profile

    env_model_dir = opts.model_path_in_container or (str(model_dir.resolve()) if model_dir is not None else None)
    env_text = read_text_exact(opts.env_file)
    ctx = EnvContext(model_ref=model_ref, model_dir=env_model_dir, tei_url=opts.tei_url,
                     tei_batch_size=tei_batch_size(parse_env(env_text), workload.max_candidates),
                     max_tokens=max_tokens, usable_cores=host.cores.usable,
                     client_keys=(result.load or {}).get("client_keys", {}))
    keys = target.env_keys(result.winner.config, ctx)
    profile = build_profile(name=name, target=target, result=result, host=host, bundle=bundle, model_ref=model_ref,
                            workload=workload, space=space, settings=opts.settings, conditions=conditions,
                            int8_sample=int8_sample, max_tokens=max_tokens, env_keys=keys,
                            model_dir=None if model_dir is None else str(model_dir),
                            model_path_in_container=opts.model_path_in_container,
                            tokenizer_check=None if check is None else check.to_dict(),
                            recording_check=None if recording is None else recording.to_dict())
    merge = merge_env(env_text, keys)
    path = profile_path(opts.profile_dir, name)
    compose_path = None
    with deferred_interrupts(), StagedFiles() as files:  # every file, or none: staged first, renamed together
        files.add(path, render_profile(profile))
        files.add(opts.env_file, merge.text.encode("utf-8", "surrogateescape"))
        if _compose_out(opts, target) is not None:
            compose_path = opts.compose_file
            files.add(compose_path, render_compose(profile_dir=opts.profile_dir, env_file=opts.env_file,
                                                   sidecar=target.sidecar, model_dir=model_dir,
                                                   cpus=host.cores.usable, profile_file=path.name,
                                                   model_path_in_container=opts.model_path_in_container,
                                                   base=compose_path.parent))
        if staged is not None:
            staged.commit()
        files.commit()
    return RunOutcome(result, host, bundle, workload, path, profile, merge, compose_path, target.name, model_dir,
                      check, recording)
