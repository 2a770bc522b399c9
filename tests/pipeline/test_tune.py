"""`tune()`: the phases in order under the host's measuring lock, as a plain function a test calls."""

from __future__ import annotations

import os

from autotune.errors import ExitStatus
from tests.support.cli import FAST, run_cli


def test_a_second_run_is_refused_before_the_model_loads(tmp_path, tiny_model_dir, workload_file, monkeypatch):
    """Even with another state directory (issue 36, item 15: such runs measured at once, unwarned)."""
    from autotune.runlock import host_lock

    loaded = []
    monkeypatch.setattr("autotune.runtime.model.resolve_model", lambda *a, **k: loaded.append(1))
    with host_lock():
        monkeypatch.setenv("AUTOTUNE_STATE_DIR", str(tmp_path / "another-state"))
        status, _, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                                "--env-file", str(tmp_path / ".env"), "--no-compose", *FAST])
    assert status == ExitStatus.LOCKED and loaded == [] and f"pid {os.getpid()}" in err, err


def test_the_phases_run_in_order_and_report_each_trial(tmp_path, tiny_model_dir, workload_file):
    from autotune.pipeline.options import RunOptions
    from autotune.pipeline.tune import tune
    from autotune.search.space import SearchSettings

    stages: list[str] = []
    trials: list[int] = []
    outcome = tune(RunOptions(workload=workload_file, model=tiny_model_dir, env_file=tmp_path / ".env",
                              profile_dir=tmp_path / "profiles", compose_file=None, model_out=tmp_path / "model",
                              settings=SearchSettings(trials=4, repeats=1, final_rounds=1)),
                   on_stage=stages.append, progress=lambda _study, trial: trials.append(trial.number))
    order = ["plan:", "computing the fp32 reference", "timing int8", "searching", "refining", "re-measuring",
             "pool:"]
    seen = [next(i for i, s in enumerate(stages) if s.startswith(prefix)) for prefix in order]
    assert seen == sorted(seen), stages
    assert trials == list(range(len(trials))) and len(trials) >= 4  # refused before measuring: not counted
    assert outcome.profile_path.exists() and (tmp_path / ".env").exists()  # committed last
    assert outcome.profile["config"] == outcome.result.winner.config.to_dict()
