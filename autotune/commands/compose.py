"""`autotune compose`: (re)write the docker compose override."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from autotune.errors import ExitStatus

NAME = "compose"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="write the docker compose override")
    p.add_argument("--out", type=Path, default=Path("compose.autotune.yaml"))
    p.add_argument("--env-file", type=Path, default=Path(".env"))
    p.add_argument("--profile-dir", type=Path, default=Path("profiles"))
    p.add_argument("--hindsight-service", default="hindsight")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.outputs.compose import write_compose

    path = write_compose(args.out, profile_dir=args.profile_dir, env_file=args.env_file,
                         hindsight_service=args.hindsight_service)
    print(f"wrote {path}", file=out)
    return ExitStatus.OK
