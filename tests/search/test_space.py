"""A search's settings: every bound checked where the settings are made, so a bad flag is one line, not a crash
minutes into measuring."""

from __future__ import annotations

import math

import pytest

from autotune.errors import OptionsError
from autotune.gates.parity import FP32_TOLERANCE, INT8_TOLERANCE
from autotune.runtime.space import SearchSpace
from autotune.search.space import SearchSettings


@pytest.mark.parametrize(("field", "value"), [
    ("repeats", 0), ("final_rounds", 0), ("trials", 0), ("refine_rounds", -1), ("timeout_s", 0.0),
    ("timeout_s", math.nan), ("max_memory_mb", 0.0), ("max_memory_mb", math.nan), ("seed", -1), ("seed", 2**32),
])
def test_each_bound_names_its_field_never_a_flag(field, value):
    """Issue 53: the library names what it holds; only `commands/` knows the flags (tests/commands/test_run.py)."""
    with pytest.raises(OptionsError) as raised:
        SearchSettings(**{field: value})
    assert raised.value.field == field and "--" not in raised.value.message  # type: ignore[attr-defined]


def test_trials_default_to_the_spaces_and_tolerance_follows_precision():
    space = SearchSpace.for_host(usable_cores=2, max_candidates=300)
    assert SearchSettings().trials_for(space) == space.default_trials()
    assert SearchSettings(trials=7).trials_for(space) == 7
    assert SearchSettings().tolerance("fp32") == FP32_TOLERANCE
    assert SearchSettings().tolerance("int8") == INT8_TOLERANCE
    assert SearchSettings(refine_rounds=0, timeout_s=math.inf).refine_rounds == 0  # 0: refinement off
