"""A tqdm progress bar for the search, with the best feasible p95 so far.

The bar appears with the first trial (so an early error stays one line) and only on a
terminal; stage messages are printed either way.
"""

from __future__ import annotations

from types import TracebackType
from typing import TextIO

import optuna
from tqdm import tqdm

from autotune.search.study import best_feasible_value


class TrialProgress:
    def __init__(self, total: int, stream: TextIO) -> None:
        self._total = total
        self._stream = stream
        self._bar: tqdm | None = None

    def __enter__(self) -> TrialProgress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.close()

    def stage(self, message: str) -> None:
        line = f"autotune: {message}"
        if self._bar is not None:
            self._bar.write(line, file=self._stream)
        else:
            print(line, file=self._stream, flush=True)

    def update(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if self._bar is None:
            interactive = hasattr(self._stream, "isatty") and self._stream.isatty()
            self._bar = tqdm(total=self._total, file=self._stream, unit="trial", dynamic_ncols=True, leave=False,
                             disable=not interactive)
        best = best_feasible_value(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
        if best is not None:
            self._bar.set_postfix_str(f"best p95 {best:.1f} ms")
        self._bar.update(1)
