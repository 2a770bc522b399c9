"""A tqdm progress bar for the search, with the best feasible p95 so far."""

from __future__ import annotations

from types import TracebackType
from typing import TextIO

import optuna
from tqdm import tqdm

from autotune.search import best_feasible_value


class TrialProgress:
    def __init__(self, total: int, stream: TextIO) -> None:
        self._bar = tqdm(total=total, file=stream, unit="trial", dynamic_ncols=True, leave=False)
        self._stream = stream

    def __enter__(self) -> TrialProgress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._bar.close()

    def stage(self, message: str) -> None:
        self._bar.write(f"autotune: {message}", file=self._stream)

    def update(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        best = best_feasible_value(study.get_trials(deepcopy=False,
                                                    states=(optuna.trial.TrialState.COMPLETE,)))
        if best is not None:
            self._bar.set_postfix_str(f"best p95 {best:.1f} ms")
        self._bar.update(1)
