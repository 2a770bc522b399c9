"""A search's settings: every bound checked where the settings are made, so a bad flag is one line, not a crash
minutes into measuring."""

from __future__ import annotations

import math

import pytest

from autotune.errors import OptionsError
from autotune.runtime.space import SearchSpace
from autotune.search.parity import FP32_TOLERANCE, INT8_TOLERANCE
from autotune.search.space import SearchSettings


@pytest.mark.parametrize(("field", "value", "flag"), [
    ("repeats", 0, "--repeats"), ("final_rounds", 0, "--final-rounds"), ("trials", 0, "--trials"),
    ("refine_rounds", -1, "--refine-rounds"), ("timeout_s", 0.0, "--timeout"), ("timeout_s", math.nan, "--timeout"),
    ("max_memory_mb", 0.0, "--max-memory"), ("max_memory_mb", math.nan, "--max-memory"), ("seed", -1, "--seed"),
    ("seed", 2**32, "--seed"),
])
def test_each_bound_names_its_flag(field, value, flag):
    with pytest.raises(OptionsError, match=flag):
        SearchSettings(**{field: value})


def test_trials_default_to_the_spaces_and_tolerance_follows_precision():
    space = SearchSpace.for_host(usable_cores=2, max_candidates=300)
    assert SearchSettings().trials_for(space) == space.default_trials()
    assert SearchSettings(trials=7).trials_for(space) == 7
    assert SearchSettings().tolerance("fp32") == FP32_TOLERANCE
    assert SearchSettings().tolerance("int8") == INT8_TOLERANCE
    assert SearchSettings(refine_rounds=0, timeout_s=math.inf).refine_rounds == 0  # 0: refinement off
