"""The time plan's arithmetic (issue 51): a --timeout bounds the whole run, cut in a fixed order, refused up front
when even the smallest run does not fit."""

from __future__ import annotations

import pytest

from autotune.errors import ExitStatus, OptionsError
from autotune.pipeline.budget import MIN_TRIALS, PHASES, Costs, estimate, plan_run
from autotune.search.space import SearchSettings
from tests.support.cli import run_cli

# a recording like issue 51's: 16 recalls, 3,728 pairs, 2 ms a pair at a good configuration, 6 ms at batch 1
COSTS = Costs(pair_s=0.002, reference_pair_s=0.006, pairs=3728, queries=16, int8=True)


def test_without_a_timeout_nothing_is_cut():
    plan = plan_run(COSTS, SearchSettings(), 24)
    assert plan.cuts == () and plan.trials == 24 and plan.trial_queries == 16
    assert [name for name, _ in plan.phases] == list(PHASES)


def test_each_phase_is_its_measured_cost_times_its_work():
    phases = estimate(COSTS, SearchSettings(repeats=3, halving=False), trials=10, trial_queries=16)
    assert phases["reference"] == pytest.approx(3728 * 0.006)
    assert phases["search"] == pytest.approx(10 * (3 * 16 + 2) * (3728 / 16) * 0.004)
    assert phases["commit"] > 20.0 and all(v >= 0 for v in phases.values())


def test_a_tight_timeout_cuts_in_order_and_keeps_a_real_search():
    roomy = plan_run(COSTS, SearchSettings(timeout_s=3000), 24)
    assert roomy.cuts == () and roomy.total_s <= 3000
    tight = plan_run(COSTS, SearchSettings(timeout_s=900), 24)  # first the trials, down to a real search
    assert tight.total_s <= 900 and MIN_TRIALS <= tight.trials < 24 and tight.settings == SearchSettings(timeout_s=900)
    assert tight.cuts == (f"the search runs {tight.trials} trials, not 24",)
    tighter = plan_run(COSTS, SearchSettings(timeout_s=330), 24)  # then repeats, rounds, finalists, queries
    assert tighter.total_s <= 330 and tighter.trials >= MIN_TRIALS and tighter.trial_queries < 16
    assert tighter.settings.repeats == 1 and tighter.settings.refine_rounds == 0
    assert tighter.settings.final_rounds == 2 and tighter.settings.finalists == 2
    assert [" ".join(c.split(" ")[:3]) for c in tighter.cuts[:7]] == [
        "each trial measures", "refinement runs 1", "the race runs", "refinement is off", "the race takes",
        "each trial measures", "the search runs"]


def test_each_phase_gets_its_share_of_what_is_left():
    plan = plan_run(COSTS, SearchSettings(timeout_s=900), 24)
    est = dict(plan.phases)
    rest = sum(est[p] for p in PHASES[PHASES.index("search"):])
    assert plan.ends("race", 1000.0, 400.0) == pytest.approx(
        400.0 + 600.0 * est["race"] / sum(est[p] for p in PHASES[PHASES.index("race"):]))
    later = rest - est["search"]
    assert plan.ends("search", 1000.0, 400.0) == pytest.approx(max(400.0 + 600.0 * est["search"] / rest,
                                                                   1000.0 - 1.5 * later))  # spare: the search's
    assert plan.ends("commit", 1000.0, 990.0) == pytest.approx(1000.0)  # the last phase has what is left
    assert plan.ends("race", 1000.0, 1200.0) == pytest.approx(1200.0)  # past the deadline: nothing more
    assert plan.ends("race", None, 5.0) is None


def test_too_little_time_is_refused_naming_what_the_run_needs():
    with pytest.raises(OptionsError, match=r"--timeout 60 s is too short .* needs about \d+ s"):
        plan_run(COSTS, SearchSettings(timeout_s=60), 24)


def test_a_run_given_too_little_time_is_refused_before_measuring(tmp_path, tiny_model_dir):
    import json

    workload = tmp_path / "q.jsonl"
    doc = " ".join(["memory"] * 200)
    workload.write_text("".join(json.dumps({"query": f"q{i}", "documents": [doc] * 60}) + "\n" for i in range(40)))
    status, _, err = run_cli(["run", "--workload", str(workload), "--model", str(tiny_model_dir), "--timeout", "2",
                              "--env-file", str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "p")])
    assert status == ExitStatus.BAD_OPTIONS and "is too short" in err and "needs about" in err
    assert "computing the fp32 reference" not in err and not (tmp_path / ".env").exists()
