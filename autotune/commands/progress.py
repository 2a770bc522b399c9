"""tqdm progress bars: the search's by trials, with the best feasible p95 so far; every other long phase's by
seconds against the time plan's estimate of it, so that a terminal shows an ETA (issue 51: a judge once ran
23 minutes without a word).

Bars appear only on a terminal (the search's with its first trial, so an early error stays one line); off one,
each phase is the one plain stage line the run prints anyway.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import TextIO

import optuna
from tqdm import tqdm

from autotune.search.study import best_feasible_value

PHASE_BAR_FROM_S = 10.0  # a phase estimated shorter than this gets no bar


class TrialProgress:
    def __init__(self, total: int | None, stream: TextIO) -> None:  # None: the plan decides, and tqdm counts
        self._total = total
        self._stream = stream
        self._bar: tqdm | None = None
        self._phase: _PhaseBar | None = None

    @property
    def interactive(self) -> bool:
        return hasattr(self._stream, "isatty") and self._stream.isatty()

    def phase(self, name: str, estimated_s: float | None) -> None:
        """A phase begins: the last one's bar closes, and a long one gets a bar of seconds with an ETA."""
        if self._phase is not None:
            self._phase.close()
            self._phase = None
        if estimated_s is not None and estimated_s >= PHASE_BAR_FROM_S and self.interactive:
            self._phase = _PhaseBar(name, estimated_s, self._stream)

    def __enter__(self) -> TrialProgress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._phase is not None:
            self._phase.close()

    def stage(self, message: str) -> None:
        line = f"autotune: {message}"
        if self._phase is not None:
            self._phase.bar.write(line, file=self._stream)
        elif self._bar is not None:
            self._bar.write(line, file=self._stream)
        else:
            print(line, file=self._stream, flush=True)

    def update(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if self._bar is None:
            self._bar = tqdm(total=self._total, file=self._stream, unit="trial", dynamic_ncols=True, leave=False,
                             disable=not self.interactive)
        best = best_feasible_value(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
        if best is not None:
            self._bar.set_postfix_str(f"best p95 {best:.1f} ms")
        self._bar.update(1)


class _PhaseBar:
    """Seconds elapsed against the plan's estimate, ticked by a thread (the phase's own loops are not told);
    held one short of the end until the next phase begins, since an estimate is not a finish."""

    def __init__(self, name: str, estimated_s: float, stream: TextIO) -> None:
        self._total = round(estimated_s)
        self.bar = tqdm(total=self._total, file=stream, desc=name, unit="s", dynamic_ncols=True, leave=False,
                        bar_format="{desc}: {bar} {n:.0f}/{total:.0f} s (about {remaining} left)")
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="autotune-progress", daemon=True)
        self._thread.start()

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            self.bar.n = min(self._total - 1, round(time.monotonic() - self._started))
            self.bar.refresh()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.bar.close()
