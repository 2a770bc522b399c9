"""`autotune helm`: a values override for Hindsight's chart from a `tei` profile."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from autotune.commands.argtypes import http_url
from autotune.commands.base import Command
from autotune.errors import ExitStatus, OptionsError
from autotune.fileio import write_atomic
from autotune.outputs.helm_values import render_helm_values
from autotune.outputs.profile import load_profile


class HelmCommand(Command):
    """`autotune helm`: a values override for Hindsight's chart from a `tei` profile."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--profile", type=Path, required=True, help="a profile tuned for --target tei")
        p.add_argument("--out", type=Path, default=Path("values.autotune.yaml"), help="the values file to write")
        p.add_argument("--image", default="autotune-reranker:latest",
                       help="the reranker image (docker/Dockerfile; its entrypoint is autotune serve)")
        p.add_argument("--tei-url", type=http_url, default="http://hindsight-tei-reranker:8090",
                       help="where the api reaches the reranker's Service (the chart names it <release>-tei-reranker)")
        p.add_argument("--replicas", type=int, default=1, help="reranker replicas in the chart")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        if args.replicas < 1:
            raise OptionsError(f"--replicas must be at least 1, got {args.replicas}")
        text = render_helm_values(load_profile(args.profile), args.profile.name, image=args.image, tei_url=args.tei_url,
                                  replicas=args.replicas)
        write_atomic(args.out, text)
        print(f"wrote {args.out}: helm upgrade <release> <hindsight chart> -f {args.out}", file=out)
        return ExitStatus.OK
