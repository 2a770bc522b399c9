"""Issue 35: Hindsight's defaults always race (the one comparison that matters), unless this machine's free
memory could not hold them; past the tuner's budget they race anyway, and the run says they are heavy."""

from __future__ import annotations

import io

import pytest
import yaml

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.search.objective import Objective


@pytest.mark.parametrize("machine_room", [True, False], ids=["fits-the-machine", "does-not"])
def test_the_baseline_races_past_the_budget_when_the_machine_can_hold_it(tmp_path, tiny_model_dir, workload_file,
                                                                          monkeypatch, machine_room):
    over = Objective.over_budget

    def baseline_over_budget(self, config, estimate=None):
        if config == self.space.baseline():
            return "estimated 9000 MB (x1.5 margin) would pass the memory budget of 2048 MB"
        return over(self, config, estimate)

    monkeypatch.setattr(Objective, "over_budget", baseline_over_budget)
    monkeypatch.setattr(Objective, "over_machine",
                        lambda self, config: None if machine_room else "would not fit in 100 MB of free memory")
    err = io.StringIO()
    status = main(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--env-file",
                   str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "p"), "--name", "n", "--trials", "3",
                   "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0"], stdout=io.StringIO(), stderr=err)
    assert status == ExitStatus.OK, err.getvalue()
    metrics = yaml.safe_load((tmp_path / "p" / "n.yaml").read_text())["metrics"]
    if machine_room:
        assert "raced anyway" in err.getvalue() and metrics["baseline_p95_ms"] is not None
    else:
        assert "not raced: would not fit" in err.getvalue() and metrics["baseline_p95_ms"] is None
