"""Two hosts of one hardware type on one PostgreSQL study: a real PostgreSQL 15 (Debian's), started as
the `postgres` user in a temp dir on a free loopback port. Each `autotune run` has its own state
directory (its own run lock and host id), as two machines would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from autotune.search.verdicts import VERDICTS_STUDY
from tests.support.real_hindsight import PG_BIN, Postgres

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (PG_BIN / "initdb").exists(),
                                                   reason="Debian's postgresql-15 is absent (.ci/run installs it)")]


@pytest.fixture(scope="module")
def postgres():  # type: ignore[no-untyped-def]
    pg = Postgres(extensions=())
    try:
        yield pg
    finally:
        pg.stop()


def start_run(work: Path, host: str, url: str, model: Path, workload: Path, trials: int) -> subprocess.Popen[str]:
    (work / host).mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTOTUNE_STATE_DIR": str(work / host / "state"),
           "AUTOTUNE_LOCK_DIR": str(work / host / "lock")}  # two hosts: each has its own cores and lock
    return subprocess.Popen(
        [sys.executable, "-m", "autotune", "run", "--workload", str(workload), "--model", str(model),
         "--storage", url, "--trials", str(trials), "--repeats", "1", "--final-rounds", "2", "--refine-rounds", "0",
         "--env-file", str(work / host / ".env"), "--profile-dir", str(work / host / "profiles"), "--name", host,
         "--no-compose", "--target", "tei", "--concurrency", "1"],
        cwd=work / host, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_hosts_split_one_study_without_duplicates_and_each_writes_its_profile(
        postgres, tmp_path, tiny_model_dir, workload_file):
    url = postgres.uri.replace("postgresql://", "postgresql+psycopg://")
    runs = [start_run(tmp_path, host, url, tiny_model_dir, workload_file, trials=10) for host in ("a", "b")]
    outputs = [r.communicate(timeout=900) for r in runs]
    for run, (_out, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, err
    for host in ("a", "b"):  # each re-raced its finalists on its own timings
        profile = yaml.safe_load((tmp_path / host / "profiles" / f"{host}.yaml").read_text())
        assert profile["parity"]["passed"] and profile["search"]["study"].startswith("autotune-tei-")
    names = [s.study_name for s in optuna.get_all_study_summaries(storage=url) if s.study_name != VERDICTS_STUDY]
    assert len(names) == 1  # one space: the second host took the first's int8 speed verdict, even a borderline one
    speeds = [yaml.safe_load((tmp_path / h / "profiles" / f"{h}.yaml").read_text())["parity"]["int8_vs_fp32"]
              ["judged"]["speed"]["ratios"] for h in ("a", "b")]
    assert speeds[0] == speeds[1]
    study = optuna.load_study(study_name=names[0], storage=url)
    trials = study.get_trials(deepcopy=False)
    measured_trials = [t for t in trials if not t.user_attrs.get("unmeasured")]  # refused before measuring: free
    assert len([t for t in measured_trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]) == 10
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.FAIL)]
    measured = [tuple(sorted(t.params.items())) for t in measured_trials if "duplicate_of" not in t.user_attrs]
    assert len(measured) == len(set(measured))  # no configuration timed twice, on either host
    assert len({t.user_attrs["host_id"] for t in trials}) == 2  # both hosts took trials

    listing = subprocess.run([sys.executable, "-m", "autotune", "studies", "--storage", url], capture_output=True,
                             text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert listing.returncode == 0, listing.stderr
    row = listing.stdout.splitlines()[1].split()
    assert row[0] == "tei" and row[4] == "10"
