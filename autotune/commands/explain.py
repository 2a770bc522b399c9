"""`autotune explain`: which knob bought what."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from autotune.analysis.explain import explain_profile, save_explain
from autotune.analysis.summary import format_explain
from autotune.commands.argtypes import positive_int
from autotune.commands.base import Command
from autotune.commands.inputs import profile_workload_host
from autotune.errors import ExitStatus


class ExplainCommand(Command):
    """`autotune explain`: which knob bought what."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--profile", type=Path, required=True, help="the profile whose pick is explained")
        p.add_argument("--workload", type=Path, required=True, help="queries.jsonl to replay")
        p.add_argument("--rounds", type=positive_int, default=3, help="interleaved rounds per leave-one-out")
        p.add_argument("--model", type=Path, help="the model directory, when the profile's is elsewhere here")
        p.add_argument("--force", action="store_true", help="run even on a different host fingerprint")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        profile, workload, host = profile_workload_host(args)
        result = explain_profile(profile, workload, host, rounds=args.rounds, force=args.force, model_dir=args.model)
        print(format_explain(result), file=out)
        save_explain(args.profile, profile, result, workload)
        print(f"saved the waterfall into {args.profile} (autotune report draws it)", file=out)
        return ExitStatus.OK
