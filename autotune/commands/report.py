"""`autotune report`: a self-contained HTML report of a profile."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from autotune.errors import ExitStatus

NAME = "report"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="write a self-contained HTML report of a profile")
    p.add_argument("--profile", type=Path, required=True, help="the profile to report on")
    p.add_argument("--out", type=Path, default=Path("report.html"), help="the HTML file to write")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.analysis.report import write_report
    from autotune.outputs.profile import load_profile

    path = write_report(load_profile(args.profile), args.out)
    print(f"wrote {path}", file=out)
    return ExitStatus.OK
