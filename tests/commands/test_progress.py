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


def test_a_long_phase_shows_a_bar_of_seconds_with_its_eta_on_a_terminal():
    """Issue 51, item 5: every phase that can run past about 10 s shows progress against the plan's estimate."""
    import time

    stream = Terminal()
    with TrialProgress(4, stream) as progress:
        progress.phase("reference", 120.0)
        time.sleep(0.7)  # a tick or so of the bar's thread
        progress.stage("computing the fp32 reference")
        progress.phase("int8", 3.0)  # short: no bar
    text = stream.getvalue()
    assert "reference:" in text and "/120 s (about" in text and "left)" in text
    assert "int8:" not in text and "autotune: computing the fp32 reference" in text


def test_off_a_terminal_a_phase_is_its_plain_line_alone():
    stream = io.StringIO()
    with TrialProgress(4, stream) as progress:
        progress.phase("reference", 120.0)
        progress.stage("computing the fp32 reference")
    assert stream.getvalue() == "autotune: computing the fp32 reference\n"
