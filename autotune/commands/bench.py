"""`autotune bench`: the profile against references, interleaved in one run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from autotune.analysis.bench import run_bench
from autotune.analysis.summary import format_bench
from autotune.commands.argtypes import positive_int
from autotune.commands.base import Command
from autotune.commands.inputs import profile_workload_host
from autotune.errors import ExitStatus


class BenchCommand(Command):
    """`autotune bench`: the profile against references, interleaved in one run."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--profile", type=Path, required=True, help="the profile to race")
        p.add_argument("--workload", type=Path, required=True, help="queries.jsonl to replay")
        p.add_argument("--against", action="append", help="hindsight-onnx, ort-default, hindsight-local or "
                       "hindsight-local-bucket (repeatable; default: Hindsight's defaults for the profile's target, "
                       "and PyTorch)")
        p.add_argument("--rounds", type=positive_int, default=5, help="interleaved rounds per contender")
        p.add_argument("--model", type=Path, help="model directory, when the profile's is elsewhere here")
        p.add_argument("--force", action="store_true", help="run even on a different host fingerprint")
        p.add_argument("--json", action="store_true", help="print the figures as JSON")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        profile, workload, host = profile_workload_host(args)
        result = run_bench(profile, workload, host, against=args.against, rounds=args.rounds, force=args.force,
                           model_dir=args.model, profile_path=args.profile)
        print(json.dumps(result.to_dict(), indent=2) if args.json else format_bench(result), file=out)
        return ExitStatus.OK
