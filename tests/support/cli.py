"""The CLI as a function, and what a hostile-input test checks after it: one line, and the user's files."""

from __future__ import annotations

import io
import os
from pathlib import Path

FAST = ["--trials", "5", "--repeats", "1", "--final-rounds", "2"]  # a whole run in seconds on the tiny model


def outputs(tmp_path: Path) -> list[str]:
    """Every output of a run under `tmp_path/out`."""
    return ["--env-file", str(tmp_path / "out" / ".env"), "--profile-dir", str(tmp_path / "out" / "profiles"),
            "--compose-file", str(tmp_path / "out" / "compose.autotune.yaml")]


def run_cli(args: list[str]) -> tuple[int, str, str]:
    """`autotune ARGS` in this process: (exit status, stdout, stderr)."""
    from autotune.cli import main

    out, err = io.StringIO(), io.StringIO()
    return main(args, stdout=out, stderr=err), out.getvalue(), err.getvalue()


def one_line(err: str) -> bool:
    """An error as the CLI must give it: one `autotune: error:` line and no traceback."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return len(lines) == 1 and lines[0].startswith("autotune: error:") and "Traceback" not in err


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file under `root` (links as their target's name), to compare before and after."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "->" + os.readlink(path)
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out
