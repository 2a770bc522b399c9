"""`autotune compose`: (re)write the docker compose override a profile's target needs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from autotune.commands.base import Command
from autotune.errors import ExitStatus
from autotune.host import default_probe
from autotune.outputs.apply import choose_profile
from autotune.outputs.compose import write_for_profile
from autotune.outputs.ownership import check_compose_out
from autotune.outputs.profile import load_profile


class ComposeCommand(Command):
    """`autotune compose`: (re)write the docker compose override a profile's target needs."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--profile", type=Path, help="the profile (default: the one in --profile-dir tuned on "
                                                    "this host)")
        p.add_argument("--out", type=Path, default=Path("compose.autotune.yaml"),
                       help="the override to write (never a base compose file)")
        p.add_argument("--env-file", type=Path, default=Path(".env"), help="the .env the services read (env_file:)")
        p.add_argument("--profile-dir", type=Path, default=Path("profiles"),
                       help="where the profiles are (mounted into the tei sidecar)")
        p.add_argument("--model-path-in-container", default=None,
                       help="onnx/local: where the model directory is mounted (default: the profile's, else "
                            "/models/reranker)")
        p.add_argument("--hindsight-service", default="hindsight", help="the Hindsight service's name in your "
                                                                        "compose file")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        check_compose_out(args.out, "--out")  # before a profile is looked for: a bad path is refused first
        profile = (args.profile if args.profile is not None
                   else choose_profile(args.profile_dir, default_probe().probe()))
        written = write_for_profile(load_profile(profile), profile, env_file=args.env_file, out=args.out,
                                    hindsight_service=args.hindsight_service,
                                    model_path_in_container=args.model_path_in_container)
        print(f"wrote {written} for {profile}: docker compose -f docker-compose.yaml -f {written} up -d", file=out)
        return ExitStatus.OK
