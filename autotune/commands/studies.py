"""`autotune studies`: the studies in a storage, shared by a fleet or one host's own."""

from __future__ import annotations

import argparse
from typing import TextIO

from autotune.commands.base import Command
from autotune.errors import ExitStatus
from autotune.search.storage import open_storage
from autotune.search.study import study_summaries


class StudiesCommand(Command):
    """`autotune studies`: the studies in a storage, shared by a fleet or one host's own."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--storage", help="Optuna storage URL, e.g. postgresql+psycopg://user@db/autotune "
                                         "(default: this host's journal)")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        summaries = study_summaries(open_storage(args.storage))
        if not summaries:
            print("no studies", file=out)
            return ExitStatus.OK
        print(f"{'target':<7} {'fingerprint':<13} {'model':<13} {'workload':<13} {'trials':>6} {'best p95':>10}  hosts",
              file=out)
        for s in summaries:
            best = "-" if s.best_p95_ms is None else f"{s.best_p95_ms:.1f} ms"
            print(f"{s.target:<7} {s.fingerprint:<13} {s.model:<13} {s.workload:<13} {s.trials_done:>6} {best:>10}  "
                  f"{', '.join(s.hosts) or '-'}", file=out)
        return ExitStatus.OK
