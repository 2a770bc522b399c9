"""`autotune probe`: describe this host."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from autotune.errors import ExitStatus

NAME = "probe"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="describe this host")
    p.add_argument("--json", action="store_true",
                   help="print the description as JSON (the shape AUTOTUNE_PROBE_FILE reads)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.analysis.summary import format_host
    from autotune.host import default_probe

    host = default_probe().probe()
    print(json.dumps(host.to_dict(), indent=2) if args.json else format_host(host), file=out)
    return ExitStatus.OK
