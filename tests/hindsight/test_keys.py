"""The pool keys as Hindsight 1.1 parses them: per-level caps over the flat value, 0 meaning "the flat value"."""

from __future__ import annotations

import pytest

from autotune.errors import OptionsError
from autotune.hindsight.keys import DEFAULT_MAX_CANDIDATES, MAX_CANDIDATES, level_key, pool_cap, user_caps


def test_levels_win_over_the_flat_value_and_zero_means_flat():
    env = {MAX_CANDIDATES: "80", level_key("low"): "20", level_key("mid"): "0"}
    assert user_caps(env) == {"low": 20, "mid": 80, "high": 80}
    assert user_caps({level_key("high"): "150"}) == {"high": 150}
    assert user_caps({}) == {}


def test_a_recall_without_a_budget_is_mid_and_no_key_is_300():
    caps = {"mid": 50}
    assert pool_cap(caps, None) == pool_cap(caps, "mid") == 50
    assert pool_cap(caps, "high") == DEFAULT_MAX_CANDIDATES == 300


@pytest.mark.parametrize(("env", "message"), [
    ({MAX_CANDIDATES: "0"}, "rerank nothing"),
    ({MAX_CANDIDATES: "many"}, "not an integer"),
    ({level_key("low"): "-3"}, "0 \\(the flat value\\) or more"),
])
def test_a_value_hindsight_would_refuse_or_misread_is_one_line(env, message):
    with pytest.raises(OptionsError, match=message):
        user_caps(env)
