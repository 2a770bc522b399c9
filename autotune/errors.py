"""Every exit status autotune can return, and the errors that map onto them.

One table, in one place, so the README, the CLI and the tests agree.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """Process exit statuses. Documented in README.md under "Exit statuses"."""

    OK = 0
    INTERNAL = 1
    BAD_WORKLOAD = 2
    BAD_MODEL = 3
    BAD_OPTIONS = 4
    IO_ERROR = 5
    DRIFT = 6
    LOCKED = 7
    MISSING_DEPENDENCY = 8
    UPSTREAM = 9
    REGRESSION = 10
    NOTHING_PASSED = 11
    DAMAGED_STATE = 12
    INTERRUPTED = 130


def first_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one short line, for messages that must stay one line."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


class AutotuneError(Exception):
    """An expected failure: printed as one line, mapped to an exit status."""

    status: ExitStatus = ExitStatus.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class WorkloadError(AutotuneError):
    status = ExitStatus.BAD_WORKLOAD


class ModelError(AutotuneError):
    status = ExitStatus.BAD_MODEL


class OptionsError(AutotuneError):
    status = ExitStatus.BAD_OPTIONS


class NothingPassedError(AutotuneError):
    """The run measured, and no configuration passed its gates (parity, memory, the result gate): a result, not a
    bad option, so a script can tell "loosen the gates or write the defaults" from "fix the command"."""

    status = ExitStatus.NOTHING_PASSED


class SettingError(OptionsError):
    """A setting out of its bounds, named by its field: the layer that parsed it (the CLI) names its flag."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem


class StateError(AutotuneError):
    """autotune's own state is damaged (the study journal): not the user's options; `--fresh` sets it aside."""

    status = ExitStatus.DAMAGED_STATE


class OutputError(AutotuneError):
    status = ExitStatus.IO_ERROR


class DriftError(AutotuneError):
    status = ExitStatus.DRIFT


class LockedError(AutotuneError):
    status = ExitStatus.LOCKED


class MissingDependencyError(AutotuneError):
    status = ExitStatus.MISSING_DEPENDENCY


class UpstreamError(AutotuneError):
    status = ExitStatus.UPSTREAM


class RegressionError(AutotuneError):
    status = ExitStatus.REGRESSION
