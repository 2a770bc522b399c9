"""One module per subcommand, each holding its `Command` class (`commands/base.py`).

This table is the one registry of command names, as pip's `commands_dict` is: a name maps to its module and a
one-line summary, and a module is imported only when its command is the one being run (or every one, for a
test that checks them all). `autotune --help` needs the summaries, never the modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autotune.commands.base import Command


@dataclass(frozen=True)
class CommandInfo:
    module: str
    summary: str

    @property
    def class_name(self) -> str:
        """`autotune.commands.probe` holds `ProbeCommand`."""
        return self.module.rsplit(".", 1)[1].capitalize() + "Command"


COMMANDS: dict[str, CommandInfo] = {
    "probe": CommandInfo("autotune.commands.probe", "describe this host"),
    "run": CommandInfo("autotune.commands.run", "search for the fastest configuration that passes parity"),
    "check": CommandInfo("autotune.commands.check", "does this host still match a profile?"),
    "compose": CommandInfo("autotune.commands.compose", "write the docker compose override a profile's target needs"),
    "serve": CommandInfo("autotune.commands.serve",
                         "TEI-compatible /rerank server using a tuned profile (a drop-in for TEI's image)"),
    "record": CommandInfo("autotune.commands.record", "record a workload from a running Hindsight's recall traces"),
    "verify": CommandInfo("autotune.commands.verify",
                          "after a cutover: live reranking time against what was recorded before"),
    "bench": CommandInfo("autotune.commands.bench", "the profile against references, interleaved in one run"),
    "explain": CommandInfo("autotune.commands.explain", "attribute the speedup to each knob"),
    "report": CommandInfo("autotune.commands.report", "write a self-contained HTML report of a profile"),
    "studies": CommandInfo("autotune.commands.studies",
                           "list the studies in a storage: host type, trials done, best p95, hosts"),
    "apply": CommandInfo("autotune.commands.apply",
                         "apply a committed profile on a host of the same type, without measuring"),
    "helm": CommandInfo("autotune.commands.helm",
                        "write a values override for Hindsight's Helm chart from a tei profile"),
}


_LOADED: dict[str, Command] = {}


def load_command(name: str) -> Command:
    """The command, its module imported now (a name not in the registry is argparse's to refuse first); one
    instance per name, so that what a test replaces on it is what the CLI calls."""
    if name not in _LOADED:
        info = COMMANDS[name]
        _LOADED[name] = getattr(import_module(info.module), info.class_name)()
    return _LOADED[name]


__all__ = ["COMMANDS", "CommandInfo", "load_command"]
