from __future__ import annotations

from autotune.analysis.explain import ExplainResult, Step, explain
from autotune.analysis.summary import format_explain
from autotune.runtime.engine import BASELINE, EngineConfig, EngineTraits
from autotune.runtime.model import load_model_dir
from autotune.runtime.sessions import EnginePool
from autotune.workload.queries import load_workload


def test_waterfall_order_and_leave_one_out(tiny_model_dir, workload_file):
    pool = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False)
    winner = EngineConfig(batch_size=4, intra_op_threads=1, length_sort=False, precision="int8")
    result = explain(pool, load_workload(workload_file), BASELINE, winner, rounds=1)
    assert [s.knob for s in result.steps] == ["batch_size", "intra_op_threads", "precision"]
    assert result.steps[-1].config == winner
    assert [s.config for s in result.leave_one_out] == [
        EngineConfig(32, 1, False, "int8"), EngineConfig(4, 0, False, "int8"), EngineConfig(4, 1, False, "fp32")]
    assert len(result.cumulative) == 3


def test_a_knob_whose_change_runs_the_same_configuration_is_not_timed(tiny_model_dir, workload_file):
    """Hindsight's onnx provider runs ONNX_THREADS=0 as its native count: reverting 2 threads to the default on
    a 2-core host times one session against itself, which is noise, not a revert."""
    pool = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False, traits=EngineTraits(zero_threads=2))
    winner = EngineConfig(batch_size=4, intra_op_threads=2, length_sort=False, precision="fp32")
    result = explain(pool, load_workload(workload_file), BASELINE, winner, rounds=1)
    assert [s.knob for s in result.steps] == ["batch_size"]
    assert [s.knob for s in result.leave_one_out] == ["batch_size"]
    assert result.unchanged == ["intra_op_threads"]
    assert result.to_dict()["unchanged"] == ["intra_op_threads"]
    assert "not timed: intra_op_threads" in format_explain(result)

    other = explain(EnginePool(load_model_dir(tiny_model_dir), has_vnni=False, traits=EngineTraits(zero_threads=1)),
                    load_workload(workload_file), BASELINE, winner, rounds=1)
    assert [s.knob for s in other.leave_one_out] == ["batch_size", "intra_op_threads"] and not other.unchanged


def test_cumulative_and_most_important():
    c = BASELINE
    result = ExplainResult(100.0, [Step("batch_size", c, 50.0, 100.0), Step("precision", c, 40.0, 50.0)], [])
    assert result.cumulative == [2.0, 2.5]
    assert result.most_important() == "batch_size"
    assert result.to_dict()["most_important"] == "batch_size"


def test_beyond_the_noise_needs_a_clear_agreeing_difference():
    """Issue 35: 0.97x with agreeing rounds is noise on these hosts; 0.81x with every round agreeing is not."""
    from autotune.analysis.explain import Step
    from autotune.runtime.engine import BASELINE

    def step(before: float, after: float, rounds: list[float]) -> Step:
        return Step("batch_size", BASELINE, after, before, rounds)

    assert not step(97, 100, [0.96, 0.97, 0.98]).beyond_noise     # 0.97x: under the 5% floor
    assert step(81, 100, [0.80, 0.82, 0.81]).beyond_noise         # 0.81x, every round agreeing
    assert not step(81, 100, [0.55, 0.92, 0.99]).beyond_noise     # rounds scatter (std/mean 24%) more than 19%
    assert not step(81, 100, [0.75, 0.85, 1.02]).beyond_noise     # rounds disagree on the direction


def test_the_gain_splits_into_cheaper_pairs_and_fewer_pairs():
    from autotune.analysis.explain import ExplainResult, Step
    from autotune.runtime.engine import BASELINE

    steps = [Step("batch_size", BASELINE, 50.0, 100.0, [2.0, 2.0]), Step("pool cap", BASELINE, 25.0, 50.0),
             Step("token cut", BASELINE, 20.0, 25.0)]
    result = ExplainResult(100.0, steps, [])
    assert result.gain(scope=False) == 2.0 and result.gain(scope=True) == 2.5
    assert result.to_dict()["fewer_pairs"] == 2.5


def test_a_profiles_scope_becomes_the_waterfalls_last_steps():
    from pathlib import Path

    from autotune.analysis.explain import scope_steps
    from autotune.workload.queries import load_workload

    workload = load_workload(Path(__file__).resolve().parent.parent / "fixtures" / "hindsight_recall.jsonl")
    profile = {"scope": {"chosen": {"max_candidates": {"mid": 20}, "max_tokens_per_candidate": 16}}}
    (cap, capped), (cut, shortened) = scope_steps(profile, workload)
    assert (cap, cut) == ("pool cap", "token cut")
    for q, c, s in zip(workload.queries, capped.queries, shortened.queries, strict=True):
        assert len(c.documents) == (min(20, len(q.documents)) if q.budget == "mid" else len(q.documents))
        assert len(s.documents) == len(c.documents) and sum(map(len, s.documents)) <= sum(map(len, c.documents))
    assert scope_steps({}, workload) == []
