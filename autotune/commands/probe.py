"""`autotune probe`: describe this host."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from autotune.analysis.summary import format_host
from autotune.commands.base import Command
from autotune.errors import ExitStatus
from autotune.host import default_probe


class ProbeCommand(Command):
    """`autotune probe`: describe this host."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true",
                       help="print the description as JSON (the shape AUTOTUNE_PROBE_FILE reads)")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        host = default_probe().probe()
        print(json.dumps(host.to_dict(), indent=2) if args.json else format_host(host), file=out)
        return ExitStatus.OK
