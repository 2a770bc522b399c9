"""Hindsight's defaults race beside the finalists (issue 35) within the memory budget like every candidate
(issue 37: past it, the tuner once reached 3.9 GB on a 2 GB budget racing them): when they would pass it, the run
says so, names --max-memory, and the profile has no baseline figure."""

from __future__ import annotations

import io

import pytest
import yaml

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.search.objective import Objective


@pytest.mark.parametrize("heavy", [False, True], ids=["fits-the-budget", "does-not"])
def test_the_baseline_races_only_within_the_budget(tmp_path, tiny_model_dir, workload_file, monkeypatch, heavy):
    over = Objective.over_budget

    def baseline_over_budget(self, config, estimate=None):
        if heavy and config == self.space.baseline():
            return "estimated 9000 MB (x1.5 margin) would pass the memory budget of 2048 MB"
        return over(self, config, estimate)

    monkeypatch.setattr(Objective, "over_budget", baseline_over_budget)
    err = io.StringIO()
    status = main(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--env-file",
                   str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "p"), "--name", "n", "--trials", "3",
                   "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0"], stdout=io.StringIO(), stderr=err)
    assert status == ExitStatus.OK, err.getvalue()
    metrics = yaml.safe_load((tmp_path / "p" / "n.yaml").read_text())["metrics"]
    if heavy:
        assert "defaults are not raced: estimated 9000 MB" in err.getvalue() and "--max-memory" in err.getvalue()
        assert metrics["baseline_p95_ms"] is None
    else:
        assert "not raced" not in err.getvalue() and metrics["baseline_p95_ms"] is not None
