"""`autotune report`: a self-contained HTML report of a profile."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from autotune.analysis.report import write_report
from autotune.commands.base import Command
from autotune.errors import ExitStatus
from autotune.outputs.profile import load_profile


class ReportCommand(Command):
    """`autotune report`: a self-contained HTML report of a profile."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--profile", type=Path, required=True, help="the profile to report on")
        p.add_argument("--out", type=Path, default=Path("report.html"), help="the HTML file to write")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        path = write_report(load_profile(args.profile), args.out)
        print(f"wrote {path}", file=out)
        return ExitStatus.OK
