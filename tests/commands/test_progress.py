"""The search's progress: stage lines always, a bar only on a terminal and only from the first trial on."""

from __future__ import annotations

import io

import optuna

from autotune.commands.progress import TrialProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def study_with(values: list[float]) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    for v in values:
        study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=v))
    return study


def test_stage_lines_before_any_trial_are_plain_lines():
    stream = Terminal()
    with TrialProgress(4, stream) as progress:
        progress.stage("probing")
    assert stream.getvalue() == "autotune: probing\n"


def test_no_bar_when_the_stream_is_not_a_terminal():
    stream = io.StringIO()
    study = study_with([12.0])
    with TrialProgress(4, stream) as progress:
        progress.update(study, study.trials[0])
        progress.stage("racing")
    assert stream.getvalue() == "autotune: racing\n"


def test_the_bar_shows_the_best_feasible_p95_on_a_terminal():
    stream = Terminal()
    study = study_with([12.0, 9.5])
    with TrialProgress(4, stream) as progress:
        progress.update(study, study.trials[1])
        progress.stage("racing")
    text = stream.getvalue()
    assert "best p95 9.5 ms" in text and "autotune: racing" in text
