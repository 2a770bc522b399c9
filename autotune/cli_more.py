"""Parsers and handlers for serve, record, bench, explain and report."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from autotune.errors import ExitStatus

Handler = Callable[[argparse.Namespace, TextIO, TextIO], int]


def add_parsers(sub: Any) -> None:
    serve = sub.add_parser("serve", help="TEI-compatible /rerank server using a tuned profile")
    serve.add_argument("--profile", type=Path)
    serve.add_argument("--env-file", type=Path)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)

    record = sub.add_parser("record", help="record a workload from a running Hindsight's recall traces")
    source = record.add_mutually_exclusive_group(required=True)
    source.add_argument("--url", help="Hindsight API base URL, e.g. http://localhost:8888")
    source.add_argument("--from-traces", type=Path, help="directory of saved recall responses (*.json)")
    record.add_argument("--bank", help="memory bank id (with --url)")
    record.add_argument("--queries", type=Path, help="text file, one query per line (with --url)")
    record.add_argument("--budget", default="mid", help="comma-separated subset of low,mid,high")
    record.add_argument("--api-key", help="or set HINDSIGHT_API_KEY; never printed or stored")
    record.add_argument("--timeout", type=float, default=30.0, help="seconds per recall")
    record.add_argument("--retries", type=int, default=2)
    record.add_argument("-o", "--out", type=Path, required=True)
    record.add_argument("--resume", action="store_true", help="append, skipping queries already recorded")

    bench = sub.add_parser("bench", help="the profile against references, interleaved in one run")
    bench.add_argument("--profile", type=Path, required=True)
    bench.add_argument("--workload", type=Path, required=True)
    bench.add_argument("--against", action="append", help="ort-default, hindsight-local, hindsight-local-bucket "
                                                          "(repeatable; default ort-default and hindsight-local)")
    bench.add_argument("--rounds", type=int, default=5)
    bench.add_argument("--model", type=Path, help="model directory, when the profile's is elsewhere here")
    bench.add_argument("--force", action="store_true", help="run even on a different host fingerprint")
    bench.add_argument("--json", action="store_true")

    explain = sub.add_parser("explain", help="attribute the speedup to each knob")
    explain.add_argument("--profile", type=Path, required=True)
    explain.add_argument("--workload", type=Path, required=True)
    explain.add_argument("--rounds", type=int, default=3)
    explain.add_argument("--model", type=Path)
    explain.add_argument("--force", action="store_true")

    report = sub.add_parser("report", help="write a self-contained HTML report of a profile")
    report.add_argument("--profile", type=Path, required=True)
    report.add_argument("--out", type=Path, default=Path("report.html"))


def cmd_serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.serve import resolve_settings, serve

    settings = resolve_settings(args.profile, args.env_file)
    print(f"autotune serve: {settings.config.label()} on http://{args.host}:{args.port}", file=err)
    serve(settings, args.host, args.port)
    return ExitStatus.OK


def cmd_record(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import os

    from tqdm import tqdm

    from autotune.errors import OptionsError
    from autotune.record import API_KEY_ENV, parse_budgets, read_queries, record_from_server, record_from_traces

    if args.from_traces is not None:
        report = record_from_traces(args.from_traces, args.out, resume=args.resume)
    else:
        if not args.bank or not args.queries:
            raise OptionsError("--url needs --bank and --queries")
        queries = read_queries(args.queries)
        budgets = parse_budgets(args.budget)
        interactive = err.isatty() if hasattr(err, "isatty") else False

        def progress(jobs):  # type: ignore[no-untyped-def]
            return tqdm(jobs, file=err, unit="recall", disable=not interactive, leave=False)

        report = record_from_server(args.url, args.bank, queries, budgets, args.out,
                                    api_key=args.api_key or os.environ.get(API_KEY_ENV), resume=args.resume,
                                    timeout_s=args.timeout, retries=args.retries, progress=progress)
    print(f"recorded {report.written} recalls into {args.out}"
          + (f" ({report.skipped_existing} already there)" if report.skipped_existing else ""), file=out)
    for failure in report.failures:
        print(f"skipped: {failure}", file=out)
    if report.failures:
        print(f"{len(report.failures)} failed; rerun with --resume to retry them", file=out)
    return ExitStatus.OK if not report.failures else ExitStatus.UPSTREAM


def _profile_workload_host(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from autotune.host import default_probe
    from autotune.profile import load_profile
    from autotune.workload import load_workload

    return load_profile(args.profile), load_workload(args.workload), default_probe().probe()


def cmd_bench(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import json

    from autotune.bench import run_bench
    from autotune.summary import format_bench

    profile, workload, host = _profile_workload_host(args)
    result = run_bench(profile, workload, host, against=args.against or ["ort-default", "hindsight-local"],
                       rounds=args.rounds, force=args.force, model_dir=args.model)
    print(json.dumps(result.to_dict(), indent=2) if args.json else format_bench(result), file=out)
    return ExitStatus.OK


def cmd_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.explain import explain_profile, save_explain
    from autotune.summary import format_explain

    profile, workload, host = _profile_workload_host(args)
    result = explain_profile(profile, workload, host, rounds=args.rounds, force=args.force, model_dir=args.model)
    print(format_explain(result), file=out)
    save_explain(args.profile, profile, result, workload)
    print(f"saved the waterfall into {args.profile} (autotune report draws it)", file=out)
    return ExitStatus.OK


def cmd_report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.profile import load_profile
    from autotune.report import write_report

    path = write_report(load_profile(args.profile), args.out)
    print(f"wrote {path}", file=out)
    return ExitStatus.OK


_HANDLERS: dict[str, Handler] = {"serve": cmd_serve, "record": cmd_record, "bench": cmd_bench,
                                 "explain": cmd_explain, "report": cmd_report}


def handler(name: str) -> Handler:
    return _HANDLERS[name]
