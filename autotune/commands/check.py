"""`autotune check`: does this host still match a profile?"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from autotune.commands.base import Command
from autotune.errors import ExitStatus
from autotune.host import default_probe
from autotune.outputs.drift import check_profile
from autotune.outputs.profile import load_profile


class CheckCommand(Command):
    """`autotune check`: does this host still match a profile?"""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--profile", type=Path, required=True, help="the profile this host should match")
        p.add_argument("--env-file", type=Path, help="also compare the .env's autotune block with the profile")
        p.add_argument("--model", type=Path, help="the source model directory the run tuned, when it is elsewhere here")
        p.add_argument("--model-out", type=Path, help="the model directory Hindsight loads, when not where `apply` "
                                                      "puts it (default: the .env's paths, else models/<profile>)")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        profile = load_profile(args.profile)
        drifts = check_profile(profile, default_probe().probe(), env_file=args.env_file, model_dir=args.model,
                               emitted=True, model_out=args.model_out)
        if not drifts:
            print(f"ok: this host matches {args.profile}", file=out)
            return ExitStatus.OK
        for line in drifts:
            print(f"drift: {line}", file=out)
        return ExitStatus.DRIFT
