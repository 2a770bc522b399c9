from __future__ import annotations

from dataclasses import replace

import pytest

from autotune.runtime.engine import EngineConfig
from autotune.runtime.space import SearchSpace
from autotune.runtime.targets import SpaceLimits, get_target

SPACE = SearchSpace(batch_sizes=(1, 2, 4, 8), threads=(0, 1, 2), mem_arena=(False, True), graphs=("plain", "fused"))


def test_grid_is_every_combination_and_matches_size():
    grid = SPACE.grid()
    assert len(grid) == SPACE.size() == 4 * 3 * 2 * 2 * 2 * 2
    assert len(set(grid)) == len(grid) and SPACE.baseline() in grid


def test_neighbours_change_one_knob_and_step_batch_size_once_each_way():
    config = EngineConfig(batch_size=2, intra_op_threads=1, length_sort=False, precision="fp32", mem_arena=True)
    out = SPACE.neighbours(config)
    changed = [[k for k, v in n.to_dict().items() if v != config.to_dict()[k]] for n in out]
    assert all(len(c) == 1 for c in changed)
    assert sorted(n.batch_size for n in out if n.batch_size != 2) == [1, 4]
    assert sorted(n.intra_op_threads for n in out if n.intra_op_threads != 1) == [0, 2]
    assert {n.graph for n in out} == {"plain", "fused"} and config not in out
    edge = replace(config, batch_size=8)
    assert [n.batch_size for n in SPACE.neighbours(edge) if n.batch_size != 8] == [4]


@pytest.mark.parametrize(("space", "expected"), [
    (SearchSpace(batch_sizes=(1, 2), threads=(0, 1)), 12),
    (SPACE, 32),
    (SearchSpace(batch_sizes=(1, 2, 4, 8, 16, 32, 64), threads=tuple(range(9)), mem_arena=(False, True),
                 graphs=("plain", "fused"), precisions=("fp32", "int8")), 60)])
def test_default_trials_scale_with_the_space_within_bounds(space, expected):
    assert space.default_trials() == expected


def test_narrowed_replaces_knobs_and_refuses_unknown_ones():
    assert SPACE.narrowed(graphs=("plain",)).size() == SPACE.size() // 2
    with pytest.raises(ValueError, match="unknown"):
        SPACE.narrowed(colour=("red",))


def test_each_target_fixes_what_its_hindsight_fixes():
    limits = SpaceLimits(usable_cores=2, max_candidates=20)
    onnx, tei, local = (get_target(n).space(limits) for n in ("onnx", "tei", "local"))
    assert onnx.spinning == (False,) and onnx.baseline().spinning is False and onnx.length_sort == (True,)
    assert tei.spinning == (True, False) and tei.baseline().spinning is True
    assert onnx.graphs == tei.graphs == ("plain", "fused") and local.graphs == ("plain",)


def test_workers_times_threads_never_pass_the_cores():
    from autotune.runtime.engine import EngineConfig
    from autotune.runtime.targets import SpaceLimits, get_target

    space = get_target("tei").space(SpaceLimits(usable_cores=2, max_candidates=8))
    assert space.workers == (1, 2)
    grid = space.grid()
    assert len(grid) == space.size() and all(space.fits(c) for c in grid)
    assert {(c.workers, c.intra_op_threads) for c in grid} == {(1, 0), (1, 1), (1, 2), (2, 1)}
    two_threads = EngineConfig(batch_size=2, intra_op_threads=2, length_sort=True, precision="fp32")
    assert all(n.workers == 1 for n in space.neighbours(two_threads))
    one_thread = EngineConfig(batch_size=2, intra_op_threads=1, length_sort=True, precision="fp32")
    assert any(n.workers == 2 for n in space.neighbours(one_thread))
    assert get_target("onnx").space(SpaceLimits(usable_cores=2, max_candidates=8)).workers == (1,)
