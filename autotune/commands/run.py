"""`autotune run`: search for the fastest configuration that passes parity, then write the outputs."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from autotune.analysis.summary import format_result
from autotune.commands.argtypes import (
    concurrency,
    finite_float,
    http_url,
    int_list,
    non_negative_float,
    positive_int,
    result_gate,
)
from autotune.commands.base import Command
from autotune.commands.progress import TrialProgress
from autotune.errors import ExitStatus, OptionsError, SettingError
from autotune.gates.parity import FP32_TOLERANCE, INT8_TOLERANCE
from autotune.outputs.profile import DEFAULT_TEI_URL
from autotune.pipeline.options import RunOptions
from autotune.pipeline.tune import tune
from autotune.runtime.targets import DEFAULT_TARGET, TARGET_NAMES, get_target
from autotune.search.space import SearchSettings


def tolerances_from(args: argparse.Namespace) -> dict[str, object]:
    out: dict[str, object] = {}
    for prec, default in (("fp32", FP32_TOLERANCE), ("int8", INT8_TOLERANCE)):
        given = {field: getattr(args, f"{prec}_{field}") for field in ("max_abs", "min_spearman", "min_topk")}
        changes = {field: value for field, value in given.items() if value is not None}
        for field, value in changes.items():
            if value < 0 or (field != "max_abs" and value > 1):
                raise OptionsError(f"--{prec}-{field.replace('_', '-')} out of range: {value}")
        if "min_topk" in changes:  # a floor the user lowered: the mean's floor is never above it
            changes["min_topk_mean"] = min(default.min_topk_mean, changes["min_topk"])
        out[f"{prec}_tolerance"] = replace(default, **changes)
    return out


# a search setting's field -> the flag that sets it: the library names fields, only the CLI names flags
FLAGS = {"repeats": "--repeats", "final_rounds": "--final-rounds", "trials": "--trials",
         "refine_rounds": "--refine-rounds", "timeout_s": "--timeout", "max_memory_mb": "--max-memory",
         "seed": "--seed"}


def options_from(args: argparse.Namespace) -> RunOptions:
    """The run's options from its flags: one place, so that the CLI's defaults are the library's."""
    try:
        settings = SearchSettings(trials=args.trials, timeout_s=args.timeout, seed=args.seed, repeats=args.repeats,
                                  final_rounds=args.final_rounds, refine_rounds=args.refine_rounds,
                                  halving=not args.no_halving, max_memory_mb=args.max_memory,
                                  **tolerances_from(args))  # type: ignore[arg-type]  # each a Tolerance
    except SettingError as exc:
        raise OptionsError(f"{FLAGS.get(exc.field, exc.field)} {exc.problem}") from None
    precisions = [p.strip() for p in args.precisions.split(",")] if args.precisions else None
    return RunOptions(workload=args.workload, model=args.model, env_file=args.env_file,
                      profile_dir=args.profile_dir, name=args.name, storage=args.storage, fresh=args.fresh,
                      settings=settings, batch_sizes=args.batch_sizes, precisions=precisions,
                      max_threads=args.max_threads, tei_url=args.tei_url or DEFAULT_TEI_URL,
                      compose_file=None if args.no_compose else args.compose_file, target=args.target,
                      model_out=args.model_out, model_path_in_container=args.model_path_in_container,
                      accept_mismatch=args.accept_mismatch, wait_quiet_s=args.wait_quiet,
                      write_baseline=args.write_baseline, max_tokens=args.max_tokens,
                      concurrency=args.concurrency, tune_pool=not args.no_pool_tuning,
                      result_gate=result_gate(args.min_result_agreement, args.min_query_agreement))


class RunCommand(Command):
    """`autotune run`: search for the fastest configuration that passes parity, then write the outputs."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--workload", type=Path, required=True, help="queries.jsonl")
        p.add_argument("--target", default=DEFAULT_TARGET, choices=TARGET_NAMES,
                       help="what Hindsight will run: onnx (in-process, Hindsight >= 1.1; the default), tei (the "
                            "autotune serve sidecar) or local (PyTorch; needs the torch extra)")
        p.add_argument("--model-out", type=Path, help="where to write the model directory Hindsight loads "
                                                      "(onnx, local; default: models/<profile name>)")
        p.add_argument("--model-path-in-container", help="the model directory's path inside Hindsight's container; "
                                                         "the compose override then mounts it there read-only")
        p.add_argument("--model", type=Path, help="directory with model.onnx and tokenizer.json "
                                                  "(default: the embedded all-MiniLM-L6-v2)")
        p.add_argument("--env-file", type=Path, default=Path(".env"),
                       help="the .env whose autotune block is written; your other lines are kept")
        p.add_argument("--profile-dir", type=Path, default=Path("profiles"),
                       help="where the profile (commit it) is written")
        p.add_argument("--name", help="profile name (default: derived from the host)")
        p.add_argument("--compose-file", type=Path, default=Path("compose.autotune.yaml"),
                       help="the docker compose override (tei, or with --model-path-in-container)")
        p.add_argument("--no-compose", action="store_true", help="do not write the compose override")
        p.add_argument("--tei-url", type=http_url, default=None, help="where Hindsight reaches `autotune serve`")
        p.add_argument("--trials", type=positive_int, default=None,
                       help="Optuna trials (default: about a sixth of the space, 12 to 60)")
        p.add_argument("--timeout", type=finite_float, default=None,
                       help="wall-clock seconds for the whole run: search, refinement and the final re-race")
        p.add_argument("--max-memory", type=finite_float, default=None, metavar="MB",
                       help="the tuner's peak RSS may not pass this; a configuration estimated or measured past it is "
                            "rejected (default: the RSS at start plus half the memory available, at most 2048)")
        p.add_argument("--refine-rounds", type=int, default=2,
                       help="interleaved rounds per hill-climbing step after the search (0: no refinement)")
        p.add_argument("--no-halving", action="store_true",
                       help="measure every trial on the whole workload (no successive halving over queries)")
        p.add_argument("--seed", type=int, default=0, help="the sampler's seed")
        p.add_argument("--repeats", type=int, default=3, help="timed passes per trial")
        p.add_argument("--final-rounds", type=int, default=3,
                       help="interleaved rounds for the finalists; up to twice that for near ties (within 10%%)")
        p.add_argument("--batch-sizes", type=int_list, help="comma-separated (default 1,2,4,8,16,32,64)")
        p.add_argument("--precisions", help="comma-separated subset of fp32,int8")
        p.add_argument("--max-tokens", type=positive_int, default=None,
                       help="onnx: truncate pairs here, up to the model's positions (Hindsight's ONNX_MAX_TOKENS; "
                            "default 512 or the model's limit); the parity reference uses the same length")
        p.add_argument("--max-threads", type=positive_int, help="cap intra-op threads (default: usable cores)")
        p.add_argument("--concurrency", type=concurrency, default=None,
                       help="time each candidate under this many concurrent recalls, queueing included; for onnx "
                            "it also searches ONNX_MAX_CONCURRENT (default: 1; for tei, "
                            "HINDSIGHT_API_RERANKER_TEI_MAX_CONCURRENT set in --env-file, else Hindsight's 8)")
        p.add_argument("--min-result-agreement", type=finite_float, default=0.95, metavar="SHARE",
                       help="the result-quality gate: per query, the share of the fp32 whole-pool results Hindsight "
                            "must still return, on average; a smaller pool, shorter candidates, int8 or a shorter "
                            "--max-tokens that keep less are rejected (strict by default: 1 result in 20 may change)")
        p.add_argument("--min-query-agreement", type=finite_float, default=0.8, metavar="SHARE",
                       help="the same, for the worst single query: no recall may lose more than this")
        p.add_argument("--no-pool-tuning", action="store_true",
                       help="do not choose HINDSIGHT_API_RERANKER_MAX_CANDIDATES_<LEVEL> or MAX_TOKENS_PER_CANDIDATE "
                            "(tune only how fast each pair is scored)")
        p.add_argument("--storage", help="Optuna storage URL (default: a journal file in the state dir)")
        p.add_argument("--fresh", action="store_true", help="discard the stored study and start over")
        p.add_argument("--wait-quiet", type=non_negative_float, default=0.0, metavar="SECONDS",
                       help="before measuring, wait up to this long for the load average to fall")
        p.add_argument("--write-baseline", action="store_true", help="when no configuration passes parity, write "
                                                                     "Hindsight's defaults rather than nothing")
        p.add_argument("--accept-mismatch", action="store_true", help="tune on a recording even when it does not "
                                                                      "reproduce Hindsight's own scores")
        for prec in ("fp32", "int8"):
            p.add_argument(f"--{prec}-max-abs", type=finite_float, help=f"parity: max |Δscore| for {prec}")
            p.add_argument(f"--{prec}-min-spearman", type=finite_float, help=f"parity: min Spearman rho for {prec}")
            p.add_argument(f"--{prec}-min-topk", type=finite_float,
                           help=f"parity: min top-k overlap for {prec}, per query (the mean's floor is never above it)")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        opts = options_from(args)
        settings = opts.settings
        with TrialProgress(settings.trials, err) as progress:
            outcome = tune(opts, progress=progress.update, on_stage=progress.stage, on_phase=progress.phase)
        print(format_result(outcome.result), file=out)
        if outcome.profile["noise"].get("note"):
            print(f"warning: {outcome.profile['noise']['note']}", file=out)
        print(f"\ntarget: {outcome.target}", file=out)
        if outcome.recording_check is not None:
            prefix = "recording" if outcome.recording_check.passed else "warning: recording"
            print(f"{prefix}: {outcome.recording_check.summary()}", file=out)
        if outcome.model_dir is not None:
            print(f"wrote {outcome.model_dir}/ (model.onnx and tokenizer files; Hindsight loads it as it is)", file=out)
        check = outcome.tokenizer_check
        if check is not None:
            print(f"tokenizer: AutoTokenizer ({check.tokenizer_class}) gives autotune's ids on all {check.pairs} pairs"
                  + (" (as an earlier run checked these files on these pairs; --fresh checks again)"
                     if check.remembered else "") if check.checked else f"note: {check.note}", file=out)
        print(f"wrote {outcome.profile_path} (commit it)", file=out)
        print(f"wrote {len(outcome.env.written_keys)} keys into the autotune block of {args.env_file}", file=out)
        for key in outcome.env.user_keys_kept:
            print(f"note: {key} is already set outside the autotune block; kept yours, not written", file=out)
        load = outcome.result.load
        if load is not None:
            through = ", ".join(f"{v:.0f} at {k}" for k, v in load.throughput_pairs_per_s.items())
            print(f"under load: p95 {load.p95_ms_loaded:.0f} ms at {load.concurrency} concurrent recalls, "
                  f"{load.p95_ms_single:.0f} ms alone; pairs/s {through}", file=out)
            print(f"chose {load.choice}", file=out)
            if load.unsafe_user_values:
                print(f"warning: {load.unsafe_user_values}", file=out)
        if outcome.compose_path:
            print(f"wrote {outcome.compose_path}: docker compose -f docker-compose.yaml -f "
                   "{outcome.compose_path} up -d",
                  file=out)
        elif not args.no_compose and (note := get_target(outcome.target).no_compose_note()) is not None:
            print(note, file=out)
        if outcome.bundle.scoring:
            print(f"model: {outcome.bundle.scoring}", file=out)
        elif not outcome.bundle.trained_head:
            print("note: this model has a seeded stand-in head (no trained classifier.* weights): its latency is "
                  "representative, its rankings are not meaningful", file=out)
        return ExitStatus.OK
