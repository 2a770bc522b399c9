"""One module per subcommand, each with `NAME`, `add_parser(sub)` and `run(args, out, err)`.

This list is the one registry of command names; `autotune.cli` only parses and dispatches.
"""

from __future__ import annotations

from types import ModuleType

from autotune.commands import (
    apply,
    bench,
    check,
    compose,
    explain,
    helm,
    probe,
    record,
    report,
    run,
    serve,
    studies,
    verify,
)

COMMANDS: dict[str, ModuleType] = {m.NAME: m for m in (probe, run, check, compose, serve, record, verify, bench,
                                                        explain, report, studies, apply, helm)}

__all__ = ["COMMANDS"]
