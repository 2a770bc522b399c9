"""`autotune verify`: the smoke test after a production cutover."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, TextIO

from autotune.analysis.verify import verify_cutover
from autotune.commands.argtypes import finite_float, positive_int, result_gate
from autotune.commands.base import Command
from autotune.errors import ExitStatus, OptionsError, RegressionError
from autotune.gates.scope import ResultGate
from autotune.hindsight.client import API_KEY_ENV
from autotune.outputs.profile import load_profile
from autotune.workload.queries import load_workload
from autotune.workload.record import parse_budgets, read_queries


def _model_dir(args: argparse.Namespace, profile: dict[str, Any] | None) -> Path | str | None:
    if args.model is not None:
        return None if args.model == "default" else Path(args.model)
    model = (profile or {}).get("model") or {}
    if model.get("dir"):
        return Path(model["dir"])
    if model.get("ref") == "default" or profile is None:
        return None
    return Path(model["ref"])


def _gate(args: argparse.Namespace, profile: dict[str, Any] | None) -> Any:
    """The floor: the flags, else the one the profile was tuned under, else run's defaults."""
    tuned = ((profile or {}).get("scope") or {}).get("gate") or {}
    default = ResultGate()
    mean, worst = args.min_result_agreement, args.min_query_agreement
    flags = result_gate(default.min_mean if mean is None else mean, default.min_query if worst is None else worst)
    own = result_gate(tuned.get("min_mean", default.min_mean), tuned.get("min_query", default.min_query),
                      source="the profile's result gate")
    return ResultGate(own.min_mean if mean is None else flags.min_mean,
                      own.min_query if worst is None else flags.min_query)


class VerifyCommand(Command):
    """`autotune verify`: the smoke test after a production cutover."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--url", required=True, help="Hindsight API base URL, e.g. http://localhost:8888")
        p.add_argument("--bank", required=True, help="memory bank id")
        p.add_argument("--queries", type=Path, required=True, help="text file, one query per line")
        p.add_argument("--budget", default="mid", help="comma-separated subset of low,mid,high")
        p.add_argument("--before", type=Path, help="the workload `autotune record` wrote before the cutover")
        p.add_argument("--profile", type=Path, help="the profile that was cut over to (its prediction, its model)")
        p.add_argument("--model", help="model directory (or `default`) for the score self-check; default: the "
                                       "profile's")
        p.add_argument("--rounds", type=positive_int, default=3, help="recalls per query after the cutover")
        p.add_argument("--min-gain", type=finite_float, default=1.1, help="exit 10 below this before/after ratio")
        p.add_argument("--min-result-agreement", type=finite_float, default=None, metavar="SHARE",
                       help="exit 10 when, on average, a recall returns less than this share of the results "
                            "it returned before (default: the profile's floor, else 0.95)")
        p.add_argument("--min-query-agreement", type=finite_float, default=None, metavar="SHARE",
                       help="the same for the worst single recall (default: the profile's floor, else 0.8)")
        p.add_argument("--api-key", help="or set HINDSIGHT_API_KEY; never printed or stored")
        p.add_argument("--timeout", type=finite_float, default=60.0, help="seconds per recall")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        if args.min_gain <= 0 or args.timeout <= 0:
            raise OptionsError("--min-gain and --timeout must be positive")
        profile = load_profile(args.profile) if args.profile else None
        before = load_workload(args.before) if args.before else None
        result = verify_cutover(args.url, args.bank, read_queries(args.queries), parse_budgets(args.budget),
                                api_key=args.api_key or os.environ.get(API_KEY_ENV), rounds=args.rounds, before=before,
                                profile=profile, model_dir=_model_dir(args, profile), timeout_s=args.timeout)
        print(f"Hindsight {result.version or '(version unknown)'}: {result.jobs} recalls x {result.rounds} rounds, "
              "all HTTP 200", file=out)
        print(f"reranker scores: {result.scale}", file=out)
        lo, hi = min(result.round_p95_ms), max(result.round_p95_ms)
        print(f"reranking phase now: p50 {result.after_p50_ms:.1f} ms, p95 {result.after_p95_ms:.1f} ms "
              f"(per-round p95 {lo:.1f}-{hi:.1f} ms, spread {result.spread:.0%})", file=out)
        if result.predicted_gain is not None:
            print(f"the profile predicted {result.predicted_gain:.2f}x its baseline's p95", file=out)
        if result.self_check is not None:
            print(f"self-check: {result.self_check.summary()}", file=out)
        for note in result.notes:
            print(f"note: {note}", file=out)
        gate = _gate(args, profile)
        if result.agreement is not None:
            int8 = ((profile or {}).get("config") or {}).get("precision") == "int8"
            print(f"results: {result.agreement.summary()} against what each recall returned before "
                  f"({len(result.agreement.per_query)} recalls; floor: mean {gate.min_mean:g}, any recall "
                  f"{gate.min_query:g})" + ("; the int8 model live against fp32 as recorded before" if int8 else ""),
                  file=out)
        gain = result.gain
        if gain is None:
            print("no --before: the gain cannot be judged (record before the cutover, then pass it)", file=out)
            return ExitStatus.OK
        print(f"before/after: reranking p95 {result.before_p95_ms:.1f} ms -> {result.after_p95_ms:.1f} ms, "
              f"{gain:.2f}x as fast ({result.matched} recalls matched)", file=out)
        if result.agreement is not None and not result.agreement.passes(gate):
            raise RegressionError(f"the cutover changed what recalls return: {result.agreement.reason(gate)} "
                                  f"({gain:.2f}x as fast): revert, or rerun autotune run with a stricter floor")
        if gain < args.min_gain:
            raise RegressionError(f"the cutover made reranking {gain:.2f}x as fast as before (below --min-gain "
                                  f"{args.min_gain}): rerun autotune run on a quiet host, or revert")
        return ExitStatus.OK
