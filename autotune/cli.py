"""The command line: the parser, the dispatch, and the one place that maps an error to an exit status."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn, TextIO

from autotune.errors import AutotuneError, ExitStatus, OptionsError
from autotune.redact import redact


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Each flag's default where it has one worth showing: not `None`, not a switch's `False`, and not where
    the help already says its default in words."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """Every parser, the subcommands' too: no abbreviated flags (`--profile` must never be read as
    `--profile-dir`), and each flag's default shown in its help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise OptionsError(f"{message} (see `{self.prog} --help`)")


def build_parser(argv: Sequence[str] = (), *, every: bool = False) -> argparse.ArgumentParser:
    """The parser, with the arguments of the command `argv` names (of every command with `every`); the others
    are a name and a summary, so that their modules are never imported."""
    from autotune import __version__
    from autotune.commands import COMMANDS, load_command

    p = _Parser(prog="autotune", description="Tune a cross-encoder reranker for this CPU host and hand "
                                             "the result to Hindsight.")
    p.add_argument("--version", action="version", version=f"autotune {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, info in COMMANDS.items():
        parser = sub.add_parser(name, help=info.summary, description=info.summary)
        if every or name == chosen:
            load_command(name).add_arguments(parser)
    return p


_SIGNALLED: list[int] = []  # set by the handlers below: what any exception raised after it really was


@contextmanager
def _signals_as_interrupt() -> Iterator[None]:
    """Ctrl-C and SIGTERM (docker stop, kill) end a command the same way: staging cleaned up, one line, exit
    130. Each is remembered, so that an interrupt that surfaces as something else (a C extension's import
    cut short says `ImportError: initialization failed`) is still reported as the interrupt it was.
    `serve` installs its own handlers (a graceful drain) once it starts."""
    _SIGNALLED.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        _SIGNALLED.append(signum)
        raise KeyboardInterrupt

    previous = {}
    for sig, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(sig) == default:
            previous[sig] = signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def interrupted_message() -> str:
    """Said from the commit point: what this command had already put in place when it was stopped."""
    from autotune.fileio import committed, partial

    written, grown = committed(), partial()
    if grown:
        return f"autotune: interrupted: {'; '.join(grown)}"
    if not written:
        return "autotune: interrupted: nothing was written; rerun the same command to resume"
    return (f"autotune: interrupted after its outputs were written and complete ({', '.join(map(str, written))}); "
            "nothing else was changed")


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    from autotune.fileio import reset_commits
    from autotune.signals import held_imports

    reset_commits()
    with _signals_as_interrupt(), held_imports():  # a Ctrl-C inside a C extension's init once crashed CPython
        return _main(argv, out, err, debug)


def _main(argv: list[str], out: TextIO, err: TextIO, debug: bool) -> int:
    try:
        args, unknown = build_parser(argv).parse_known_args(argv)
        from autotune.commands import load_command

        command = load_command(args.command)
        if unknown:
            if not command.accepts_unknown:
                raise OptionsError(f"unrecognized arguments: {' '.join(unknown)} (see `autotune --help`)")
            args.unknown = unknown
        status = int(dispatch(args, out, err))
        if _SIGNALLED and status != ExitStatus.INTERRUPTED and not command.owns_signals:
            # the interrupt was swallowed on its way up (a library's bare `except:` around an import: once in a
            # stress test's fifty Ctrl-Cs a run went on to the end and exited 0): still reported as what it was
            print(interrupted_message(), file=err)
            return int(ExitStatus.INTERRUPTED)
        return status
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except AutotuneError as exc:
        print(f"autotune: error: {redact(exc.message)}", file=err)  # a URL's password never reaches a terminal
        if debug:
            traceback.print_exc(file=err)
        return int(exc.status)
    except KeyboardInterrupt:
        print(interrupted_message(), file=err)
        return int(ExitStatus.INTERRUPTED)
    except Exception as exc:
        if debug:
            traceback.print_exc(file=err)
        if _SIGNALLED:  # the signal came first; this is how it surfaced
            print(interrupted_message(), file=err)
            return int(ExitStatus.INTERRUPTED)
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"autotune: internal error: {type(exc).__name__}: {redact(first)} (rerun with --debug for details)",
              file=err)
        return int(ExitStatus.INTERNAL)


def dispatch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.commands import load_command

    warnings.simplefilter("ignore")
    return int(load_command(args.command).run(args, out, err))
