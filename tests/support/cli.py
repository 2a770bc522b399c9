"""The CLI as a function, and what a hostile-input test checks after it: one line, and the user's files."""

from __future__ import annotations

import io
import json
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


SMALL_WORKLOAD = "".join(json.dumps({"query": f"q{i}", "documents": ["a b", "c d e", "f"]}) + "\n" for i in range(4))


def run_in(work: Path, args: list[str], *, chdir: bool = False, **env: str) -> tuple[int, str, str]:
    """`run_cli` for a module-scoped fixture, in `work` with a small workload (`queries.jsonl`) unless one is
    there: such a fixture is set up before the per-test isolated dirs, so its state dir (the Optuna journal)
    and measuring lock are made its own here, as are the variables in `env`."""
    import pytest

    if not (work / "queries.jsonl").exists():
        (work / "queries.jsonl").write_text(SMALL_WORKLOAD)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOTUNE_STATE_DIR", str(work / "state"))
        mp.setenv("AUTOTUNE_LOCK_DIR", str(work))
        for key, value in env.items():
            mp.setenv(key, value)
        if chdir:
            mp.chdir(work)
        return run_cli(args)


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
