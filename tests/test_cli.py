"""The CLI as a whole: distinct exit statuses, and `--debug` for the traceback a one-line error hides."""

from __future__ import annotations

from autotune.errors import ExitStatus
from tests.support.cli import run_cli


def test_debug_shows_traceback(tmp_path):
    status, _, err = run_cli(["--debug", "run", "--workload", str(tmp_path / "none.jsonl")])
    assert status == ExitStatus.BAD_WORKLOAD and "Traceback" in err


def test_exit_statuses_are_distinct():
    values = [s.value for s in ExitStatus]
    assert len(values) == len(set(values))
