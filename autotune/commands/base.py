"""What every subcommand is, as pip's `Command` is: its flags, and what it does with them.

The CLI parses, calls `run`, and maps an error to its exit status; a command says only what sets it apart
(unknown flags it passes on, signals it handles itself), as class attributes the CLI reads by name.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from typing import ClassVar, TextIO


class Command(ABC):
    """One subcommand: `add_arguments` declares its flags (named here, in `commands/`, and nowhere below), `run`
    does the work through plain functions and returns an exit status."""

    accepts_unknown: ClassVar[bool] = False  # flags the parser does not know reach `run` as `args.unknown`
    owns_signals: ClassVar[bool] = False  # it handles SIGINT/SIGTERM itself: its status is not an interruption

    @abstractmethod
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Declare the command's flags on its own parser."""

    @abstractmethod
    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Do the work; print results to `out` and progress to `err`; return an exit status."""
