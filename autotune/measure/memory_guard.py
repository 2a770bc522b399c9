"""A watchdog on the tuner's own RSS while it measures: the estimate decides what runs, this makes sure.

The estimate admits a configuration only if it fits with a margin, but an estimate can be wrong: the `tei`
target's concurrent race once held every finalist's worker sessions at once and passed 4 GB against a 2 GB
budget. A thread samples the RSS (psutil) every few milliseconds; past a share of the budget it trips, and
every measuring loop checks it between queries (`check`), so the run stops with one line naming what it was
measuring, before the process passes the budget. Cooperative, not a signal: a stop never lands inside a
journal write or an ORT call.
"""

from __future__ import annotations

import threading
from types import TracebackType

from autotune.errors import OptionsError
from autotune.measure.memory import rss_mb

TRIP_SHARE = 0.95  # of the budget: stop here, before the budget itself is passed

_active: MemoryGuard | None = None


class MemoryTripped(OptionsError):
    """The guard's stop: a search's trial catches it, frees what it held and goes on when the RSS falls back."""

    def __init__(self, message: str, rss_mb: float) -> None:
        super().__init__(message)
        self.rss_mb = rss_mb


class MemoryGuard:
    """`with MemoryGuard(budget_mb): ...` around the measuring phases; `measuring(label)` names the work."""

    def __init__(self, budget_mb: float | None, *, share: float = TRIP_SHARE, interval_s: float = 0.005) -> None:
        self.budget_mb = budget_mb
        self.limit_mb = None if budget_mb is None else share * budget_mb
        self.interval_s = interval_s
        self.what = "the run"
        self.tripped_mb: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> MemoryGuard:
        global _active
        self._start()
        _active = self
        return self

    def _start(self) -> None:
        if self.limit_mb is not None:
            self._thread = threading.Thread(target=self._watch, name="autotune-memory-guard", daemon=True)
            self._thread.start()

    def rearm(self) -> bool:
        """After a trip, once what tripped it is freed: watch again if the RSS is back under the limit (True);
        False leaves it tripped, for a process that could not give the memory back."""
        if self.tripped_mb is None:
            return True
        if self.limit_mb is not None and rss_mb() > self.limit_mb:
            return False
        if self._thread is not None:
            self._thread.join()
        self.tripped_mb = None
        self._start()
        return True

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            rss = rss_mb()
            if self.limit_mb is not None and rss > self.limit_mb:
                self.tripped_mb = rss
                return

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        global _active
        _active = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def error(self) -> MemoryTripped:
        return MemoryTripped(f"stopped while measuring {self.what}: the tuner's RSS reached {self.tripped_mb:.0f} MB, "
                            f"past {self.limit_mb:.0f} MB, where it stops short of the memory budget of "
                            f"{self.budget_mb:.0f} MB; raise --max-memory, or lower --batch-sizes, --max-tokens "
                            "or --concurrency", self.tripped_mb or 0.0)


def measuring(what: str) -> None:
    """Name what is being measured now, for the guard's message."""
    if _active is not None:
        _active.what = what


def check() -> None:
    """Between two queries: stop here, with the guard's one line, if the RSS has passed its share."""
    guard = _active
    if guard is not None and guard.tripped_mb is not None:
        raise guard.error()


def rearm() -> bool:
    """`MemoryGuard.rearm` on the active guard (True where there is none)."""
    return True if _active is None else _active.rearm()


def raise_budget(budget_mb: float) -> None:
    """The active guard watches a larger budget from now on (never a smaller one): the race may hold Hindsight's
    defaults, which the host runs today, past the budget that bounds the pick (issue 50, item 16)."""
    guard = _active
    if guard is None or guard.budget_mb is None or budget_mb <= guard.budget_mb:
        return
    guard.limit_mb = (guard.limit_mb or 0.0) * budget_mb / guard.budget_mb
    guard.budget_mb = budget_mb
