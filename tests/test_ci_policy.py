"""The suite's own rule: with CI=1 a skip fails the run, unless the test is on the commented allow-list."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run_skipping_suite(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_skips.py").write_text("import pytest\n\n\ndef test_runs():\n    pass\n\n\n"
                                            "@pytest.mark.skip(reason='a dependency is missing')\n"
                                            "def test_skips():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), str(tmp_path)], capture_output=True, text=True, env=env, cwd=tmp_path)


def test_a_skip_fails_the_run_under_ci_and_says_which(tmp_path):
    done = _run_skipping_suite(tmp_path, "1")
    assert done.returncode == 1, done.stdout
    assert "test_skips.py::test_skips: a dependency is missing" in done.stdout


def test_a_skip_is_only_reported_outside_ci(tmp_path):
    done = _run_skipping_suite(tmp_path, None)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_allow_list_names_tests_that_exist():
    from tests.conftest import CI_ALLOWED_SKIPS

    for node in CI_ALLOWED_SKIPS:
        path, name = node.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(), node
