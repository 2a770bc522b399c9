"""The pre-checks before the search: a knob that cannot win (int8 failing parity at batch 1, a fusion the
optimizer lacks) leaves the space, and says why."""

from __future__ import annotations

import pytest

from autotune.errors import OptionsError
from autotune.gates.parity import FP32_TOLERANCE, Tolerance
from autotune.gates.prechecks import prechecked
from autotune.runtime.space import SearchSpace
from tests.support.setting import SPACE


def test_prechecks_drop_what_cannot_win_and_say_why(setup):
    pool, workload, reference = setup
    space = SearchSpace(batch_sizes=(1, 4), threads=(0, 1), graphs=("plain", "fused"))
    strict_int8 = Tolerance(max_abs=0.0, min_spearman=1.0, min_topk=1.0)
    narrowed, dropped, verdict = prechecked(space, pool, workload, reference, strict_int8)
    assert narrowed.precisions == ("fp32",) and narrowed.graphs == ("plain",)
    assert [(d.knob, d.value) for d in dropped] == [("graph", "fused"), ("precision", "int8")]
    assert "model_type" in dropped[0].reason and "no variant keeps the results" in dropped[1].reason
    assert verdict is not None and verdict.chosen is None
    assert [v.scales for v, _ in verdict.reports[:3]] == ["per-token", "per-channel", "per-tensor"]  # each judged
    assert all(f"int8 {v.label()}:" in line for (v, _), line in zip(verdict.reports, verdict.lines(), strict=False))
    kept, none, no_int8 = prechecked(SPACE, pool, workload, reference, FP32_TOLERANCE)
    assert kept == SPACE and none == [] and no_int8 is None
    with pytest.raises(OptionsError, match="add fp32"):
        prechecked(SPACE.narrowed(precisions=("int8",)), pool, workload, reference, strict_int8)


def test_a_pool_that_runs_no_onnx_graph_drops_int8_and_fused_saying_so():
    """Issue 53: asked of the pool's declared interface (`OnnxPool`), not guessed from `model_path` returning None;
    nothing int8 is called on a pool that has no int8 operations."""
    from autotune.gates.prechecks import NO_GRAPH
    from tests.support.pools import CostPool

    space = SearchSpace(batch_sizes=(1, 4), threads=(0, 1), graphs=("plain", "fused"))
    narrowed, dropped, verdict = prechecked(space, CostPool(lambda _c: 1.0), None, [], FP32_TOLERANCE,  # type: ignore[arg-type]  # a stand-in pool
                                            speed_first=True)
    assert narrowed.precisions == ("fp32",) and narrowed.graphs == ("plain",) and verdict is None
    assert sorted((d.knob, d.value, d.reason) for d in dropped) == [("graph", "fused", NO_GRAPH),
                                                                   ("precision", "int8", NO_GRAPH)]
