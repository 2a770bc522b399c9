"""Hindsight's defaults race beside the finalists (issue 35). The memory budget bounds the pick, not the reference
(issue 50, item 16): past the default budget, the race raises it where the host can hold the defaults; past a
--max-memory the user set, or past what the host can give, the run says they were not raced, and why."""

from __future__ import annotations

import io

import pytest
import yaml

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.search.objective import Objective


@pytest.mark.parametrize("case", ["fits-the-budget", "host-holds-it", "user-budget", "host-cannot"])
def test_the_baseline_races_wherever_the_host_can_hold_it(tmp_path, tiny_model_dir, workload_file, monkeypatch,
                                                          case):
    over = Objective.over_budget

    def baseline_over_budget(self, config, estimate=None):
        if case != "fits-the-budget" and config == self.space.baseline() and self.memory_budget_mb < 9000:
            return "estimated 9000 MB (x1.5 margin) would pass the memory budget of 2048 MB"
        return over(self, config, estimate)

    monkeypatch.setattr(Objective, "over_budget", baseline_over_budget)
    if case == "host-cannot":
        monkeypatch.setattr(Objective, "room_for_baseline", lambda self, host_mb: None)
    err = io.StringIO()
    memory = ["--max-memory", "4096"] if case == "user-budget" else []
    status = main(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--env-file",
                   str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "p"), "--name", "n", "--trials", "3",
                   "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0", *memory],
                  stdout=io.StringIO(), stderr=err)
    assert status == ExitStatus.OK, err.getvalue()
    metrics = yaml.safe_load((tmp_path / "p" / "n.yaml").read_text())["metrics"]
    said = err.getvalue()
    if case in ("fits-the-budget", "host-holds-it"):
        assert "not raced" not in said and metrics["baseline_p95_ms"] is not None
        assert ("raised" in said and "race beside the pick" in said) == (case == "host-holds-it")
    else:
        assert "defaults are not raced, so no speedup over them is stated: estimated 9000 MB" in said
        assert ("--max-memory" in said) == (case == "user-budget") and metrics["baseline_p95_ms"] is None
