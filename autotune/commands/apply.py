"""`autotune apply`: write a committed profile's `.env` block and compose override, without measuring."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from autotune.commands.base import Command
from autotune.errors import ExitStatus, OptionsError
from autotune.host import default_probe
from autotune.outputs.apply import apply_profile, choose_profile


class ApplyCommand(Command):
    """`autotune apply`: write a committed profile's `.env` block and compose override, without measuring."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        which = p.add_mutually_exclusive_group(required=True)
        which.add_argument("--profile", type=Path, help="the profile to apply")
        which.add_argument("--profile-dir", "--profiles-dir", dest="profiles_dir", type=Path,
                           help="pick the profile tuned on this host type from this directory")
        p.add_argument("--env-file", type=Path, default=Path(".env"),
                       help="the .env whose autotune block is written; your other lines are kept")
        p.add_argument("--compose-file", type=Path, default=None,
                       help="also write the compose override `run` writes (tei; onnx with a container path)")
        p.add_argument("--model-out", type=Path, default=None,
                       help="where this node keeps the model directory (default: models/<profile name>, or the "
                            "profile's own directory when it lies here)")
        p.add_argument("--force", action="store_true", help="apply even where the host differs from the profile's")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        host = default_probe().probe()
        path = args.profile if args.profile is not None else choose_profile(args.profiles_dir, host)
        if args.env_file.is_dir():
            raise OptionsError(f"--env-file {args.env_file} is a directory")
        result = apply_profile(path, host, env_file=args.env_file, compose_file=args.compose_file, force=args.force,
                               model_out=args.model_out)
        for line in result.forced_drifts:
            print(f"warning: drift (forced): {line}", file=out)
        print(f"applied {result.profile_path}: {len(result.env.written_keys)} keys into the autotune block of "
              f"{args.env_file}", file=out)
        for key in result.env.user_keys_kept:
            print(f"note: {key} is already set outside the autotune block; kept yours, not written", file=out)
        if result.compose_path is not None:
            print(f"wrote {result.compose_path}", file=out)
        for note in result.notes:
            print(f"note: {note}", file=out)
        return ExitStatus.OK
