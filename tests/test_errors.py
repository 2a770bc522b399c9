"""The exit-status table: every error maps to its status, and the README documents each status."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotune import errors
from autotune.errors import AutotuneError, ExitStatus, first_line

README = Path(__file__).resolve().parents[1] / "README.md"


def error_classes() -> list[type[AutotuneError]]:
    return [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, AutotuneError)
            and c is not AutotuneError]


def test_each_error_has_a_status_of_its_own():
    """A kind of error declares its status once; a refinement of it (SettingError) inherits it."""
    declared = [c.status for c in error_classes() if "status" in vars(c)]
    assert len(declared) == len(set(declared))
    assert all(c.status is not ExitStatus.INTERNAL for c in error_classes())


def test_the_readme_documents_every_status_and_no_other():
    table = README.read_text().split("## Exit statuses", 1)[1].split("\n## ", 1)[0]
    documented = {int(n) for n in re.findall(r"^\| (\d+) \|", table, flags=re.M)}
    assert documented == {int(s) for s in ExitStatus}


@pytest.mark.parametrize(("exc", "line"), [
    (ValueError("first\nsecond"), "first"),
    (ValueError(""), "ValueError"),
    (OSError("  padded  "), "padded"),
])
def test_first_line_keeps_a_message_to_one_line(exc, line):
    assert first_line(exc) == line


def test_first_line_is_bounded():
    assert len(first_line(RuntimeError("x" * 1000))) == 300
