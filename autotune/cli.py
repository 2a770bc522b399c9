"""Argument parsing and printing only; every command's logic lives in a plain function."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from autotune.errors import AutotuneError, ExitStatus, OptionsError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise OptionsError(f"{message} (see `{self.prog} --help`)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="autotune", description="Tune a cross-encoder reranker for this CPU host and hand "
                                             "the result to Hindsight.")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    probe = sub.add_parser("probe", help="describe this host")
    probe.add_argument("--json", action="store_true")

    run = sub.add_parser("run", help="search for the fastest configuration that passes parity")
    run.add_argument("--workload", type=Path, required=True, help="queries.jsonl")
    run.add_argument("--model", type=Path, help="directory with model.onnx and tokenizer.json "
                                                "(default: the embedded all-MiniLM-L6-v2)")
    run.add_argument("--env-file", type=Path, default=Path(".env"))
    run.add_argument("--profile-dir", type=Path, default=Path("profiles"))
    run.add_argument("--name", help="profile name (default: derived from the host)")
    run.add_argument("--compose-file", type=Path, default=Path("compose.autotune.yaml"))
    run.add_argument("--no-compose", action="store_true", help="do not write the compose override")
    run.add_argument("--tei-url", default=None, help="where Hindsight reaches `autotune serve`")
    run.add_argument("--trials", type=int, default=30)
    run.add_argument("--timeout", type=float, default=None, help="seconds for the search")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--repeats", type=int, default=3, help="timed passes per trial")
    run.add_argument("--final-rounds", type=int, default=3, help="interleaved rounds for the finalists")
    run.add_argument("--batch-sizes", type=_int_list, help="comma-separated (default 1,2,4,8,16,32,64)")
    run.add_argument("--precisions", help="comma-separated subset of fp32,int8")
    run.add_argument("--max-threads", type=_positive_int, help="cap intra-op threads (default: usable cores)")
    run.add_argument("--storage", help="Optuna storage URL (default: a journal file in the state dir)")
    run.add_argument("--fresh", action="store_true", help="discard the stored study and start over")
    for prec in ("fp32", "int8"):
        run.add_argument(f"--{prec}-max-abs", type=float, help=f"parity: max |Δscore| for {prec}")
        run.add_argument(f"--{prec}-min-spearman", type=float, help=f"parity: min Spearman rho for {prec}")
        run.add_argument(f"--{prec}-min-topk", type=float, help=f"parity: min top-k overlap for {prec}")

    check = sub.add_parser("check", help="does this host still match a profile?")
    check.add_argument("--profile", type=Path, required=True)
    check.add_argument("--env-file", type=Path)
    check.add_argument("--model", type=Path)

    compose = sub.add_parser("compose", help="write the docker compose override")
    compose.add_argument("--out", type=Path, default=Path("compose.autotune.yaml"))
    compose.add_argument("--env-file", type=Path, default=Path(".env"))
    compose.add_argument("--profile-dir", type=Path, default=Path("profiles"))
    compose.add_argument("--hindsight-service", default="hindsight")

    from autotune import cli_more

    cli_more.add_parsers(sub)
    return p


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        args = build_parser().parse_args(argv)
        return int(dispatch(args, out, err))
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except AutotuneError as exc:
        print(f"autotune: error: {exc.message}", file=err)
        if debug:
            traceback.print_exc(file=err)
        return int(exc.status)
    except KeyboardInterrupt:
        print("autotune: interrupted: nothing was written; rerun the same command to resume", file=err)
        return int(ExitStatus.INTERRUPTED)
    except Exception as exc:
        if debug:
            traceback.print_exc(file=err)
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"autotune: internal error: {type(exc).__name__}: {first} (rerun with --debug for details)", file=err)
        return int(ExitStatus.INTERNAL)


def dispatch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune import cli_more

    handlers = {"probe": cmd_probe, "run": cmd_run, "check": cmd_check, "compose": cmd_compose}
    handler = handlers.get(args.command) or cli_more.handler(args.command)
    warnings.simplefilter("ignore")
    return handler(args, out, err)


def cmd_probe(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.host import default_probe
    from autotune.summary import format_host

    host = default_probe().probe()
    print(json.dumps(host.to_dict(), indent=2) if args.json else format_host(host), file=out)
    return ExitStatus.OK


def tolerances_from(args: argparse.Namespace) -> dict[str, object]:
    from dataclasses import replace

    from autotune.parity import FP32_TOLERANCE, INT8_TOLERANCE

    out: dict[str, object] = {}
    for prec, default in (("fp32", FP32_TOLERANCE), ("int8", INT8_TOLERANCE)):
        given = {field: getattr(args, f"{prec}_{field}") for field in ("max_abs", "min_spearman", "min_topk")}
        changes = {field: value for field, value in given.items() if value is not None}
        for field, value in changes.items():
            if value < 0 or (field != "max_abs" and value > 1):
                raise OptionsError(f"--{prec}-{field.replace('_', '-')} out of range: {value}")
        out[f"{prec}_tolerance"] = replace(default, **changes)
    return out


def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.profile import DEFAULT_TEI_URL
    from autotune.progress import TrialProgress
    from autotune.search import SearchSettings
    from autotune.summary import format_result
    from autotune.tuner import RunOptions, tune

    settings = SearchSettings(trials=args.trials, timeout_s=args.timeout, seed=args.seed, repeats=args.repeats,
                              final_rounds=args.final_rounds, **tolerances_from(args))  # type: ignore[arg-type]
    precisions = [p.strip() for p in args.precisions.split(",")] if args.precisions else None
    opts = RunOptions(workload=args.workload, model=args.model, env_file=args.env_file,
                      profile_dir=args.profile_dir, name=args.name, storage=args.storage, fresh=args.fresh,
                      settings=settings, batch_sizes=args.batch_sizes, precisions=precisions,
                      max_threads=args.max_threads, tei_url=args.tei_url or DEFAULT_TEI_URL,
                      compose_file=None if args.no_compose else args.compose_file)
    with TrialProgress(settings.trials, err) as progress:
        outcome = tune(opts, progress=progress.update, on_stage=progress.stage)
    print(format_result(outcome.result), file=out)
    print(f"\nwrote {outcome.profile_path} (commit it)", file=out)
    print(f"wrote {len(outcome.env.written_keys)} keys into the autotune block of {args.env_file}", file=out)
    for key in outcome.env.user_keys_kept:
        print(f"note: {key} is already set outside the autotune block; kept yours, not written", file=out)
    if outcome.compose_path:
        print(f"wrote {outcome.compose_path}: docker compose -f docker-compose.yaml -f {outcome.compose_path} up -d",
              file=out)
    if not outcome.bundle.trained_head:
        print("note: the embedded default has a stand-in head: its latency is representative, its rankings "
              "are not meaningful", file=out)
    return ExitStatus.OK


def cmd_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.check import check_profile
    from autotune.host import default_probe
    from autotune.profile import load_profile

    profile = load_profile(args.profile)
    drifts = check_profile(profile, default_probe().probe(), env_file=args.env_file, model_dir=args.model)
    if not drifts:
        print(f"ok: this host matches {args.profile}", file=out)
        return ExitStatus.OK
    for line in drifts:
        print(f"drift: {line}", file=out)
    return ExitStatus.DRIFT


def cmd_compose(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.compose import write_compose

    path = write_compose(args.out, profile_dir=args.profile_dir, env_file=args.env_file,
                         hindsight_service=args.hindsight_service)
    print(f"wrote {path}", file=out)
    return ExitStatus.OK
