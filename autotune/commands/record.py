"""`autotune record`: a workload from a running Hindsight's recall traces."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from autotune.commands.argtypes import positive_int
from autotune.commands.base import Command
from autotune.errors import ExitStatus, OptionsError
from autotune.gates.selfcheck import check_recording
from autotune.hindsight.client import API_KEY_ENV, check_http_options
from autotune.outputs.envfile import effective_values
from autotune.workload.candidate_cap import cap_from_env
from autotune.workload.queries import load_workload
from autotune.workload.record import (
    parse_budgets,
    read_queries,
    record_from_server,
    record_from_traces,
)


class RecordCommand(Command):
    """`autotune record`: a workload from a running Hindsight's recall traces."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        source = p.add_mutually_exclusive_group(required=True)
        source.add_argument("--url", help="Hindsight API base URL, e.g. http://localhost:8888")
        source.add_argument("--from-traces", type=Path, help="directory of saved recall responses (*.json)")
        p.add_argument("--bank", help="memory bank id (with --url)")
        p.add_argument("--queries", type=Path, help="text file, one query per line (with --url)")
        p.add_argument("--budget", default="mid", help="comma-separated subset of low,mid,high")
        p.add_argument("--max-tokens", type=positive_int, default=None,
                       help="the recall's max_tokens, as your agent sends it (default: Hindsight's, 4096): how many "
                            "results come back, which the result-quality gate of `run` compares")
        p.add_argument("--api-key", help="or set HINDSIGHT_API_KEY; never printed or stored")
        p.add_argument("--timeout", type=float, default=30.0, help="seconds per recall, start to end")
        p.add_argument("--retries", type=int, default=2, help="retries per recall on time-outs, 429 and 5xx")
        p.add_argument("-o", "--out", type=Path, required=True,
                       help="the queries.jsonl to write (hashes and texts of your recalls)")
        p.add_argument("--resume", action="store_true", help="append, skipping queries already recorded")
        p.add_argument("--model", help="model directory (or `default`) to check the recording against Hindsight's "
                                       "own scores")
        p.add_argument("--env-file", type=Path, help="the .env this Hindsight runs with: the self-check cuts documents "
                                                     "to its MAX_TOKENS_PER_CANDIDATE, as Hindsight did")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        check_http_options(args.timeout, args.retries)  # before any file is created
        if args.env_file is not None and not args.env_file.is_file():
            raise OptionsError(f"--env-file {args.env_file} is not a file: pass the .env this Hindsight runs with")
        cap = None if args.env_file is None else cap_from_env(effective_values(args.env_file))
        if args.from_traces is not None:
            report = record_from_traces(args.from_traces, args.out, resume=args.resume)
        else:
            if not args.bank or not args.queries:
                raise OptionsError("--url needs --bank and --queries")
            queries = read_queries(args.queries)
            budgets = parse_budgets(args.budget)
            interactive = err.isatty() if hasattr(err, "isatty") else False

            def progress(jobs):
                return tqdm(jobs, file=err, unit="recall", disable=not interactive, leave=False)

            report = record_from_server(args.url, args.bank, queries, budgets, args.out,
                                        api_key=args.api_key or os.environ.get(API_KEY_ENV), resume=args.resume,
                                        timeout_s=args.timeout, retries=args.retries, progress=progress,
                                        max_tokens=args.max_tokens)
        print(f"recorded {report.written} recalls into {args.out}"
              + (f" ({report.skipped_existing} already there)" if report.skipped_existing else ""), file=out)
        for failure in report.failures:
            print(f"skipped: {failure}", file=out)
        for note in report.notes:
            print(f"note: {note}", file=out)
        if report.failures:
            print(f"{len(report.failures)} failed; rerun with --resume to retry them", file=out)
        if args.model is not None and (report.written or report.skipped_existing):
            model = None if args.model == "default" else Path(args.model)
            check = check_recording(load_workload(args.out).queries, model, cap=cap)
            if check is None:
                print("self-check: the recording holds no scores of Hindsight's to compare with", file=out)
            else:
                print(f"self-check: {check.summary()}", file=out)
        return ExitStatus.OK if not report.failures else ExitStatus.UPSTREAM
