"""The value types of the CLI's flags: bad text is refused with a message argparse prints as one line."""

from __future__ import annotations

import argparse

import pytest

from autotune.commands.argtypes import finite_float, int_list, non_negative_float, positive_int


@pytest.mark.parametrize(("parse", "text", "value"), [
    (positive_int, "3", 3),
    (int_list, "1,2, 8", [1, 2, 8]),
    (int_list, "4,", [4]),
    (finite_float, "-1.5", -1.5),
    (non_negative_float, "0", 0.0),
])
def test_good_values(parse, text, value):
    assert parse(text) == value


@pytest.mark.parametrize(("parse", "text", "says"), [
    (positive_int, "0", "at least 1"),
    (positive_int, "2.5", "expected an integer"),
    (int_list, "", "positive integers"),
    (int_list, "1,0", "positive integers"),
    (int_list, "1,x", "comma-separated integers"),
    (finite_float, "nan", "finite"),
    (finite_float, "inf", "finite"),
    (finite_float, "fast", "expected a number"),
    (non_negative_float, "-0.1", "0 or more"),
    (non_negative_float, "nan", "finite"),
])
def test_bad_values_say_what_is_wrong(parse, text, says):
    with pytest.raises(argparse.ArgumentTypeError, match=says):
        parse(text)


@pytest.mark.parametrize(("mean", "query", "named"), [(0.0, 0.8, "--min-result-agreement"),
                                                      (0.95, float("nan"), "--min-query-agreement"),
                                                      (1.5, 0.8, "--min-result-agreement")])
def test_a_result_gate_out_of_bounds_names_its_flag_and_only_commands_name_flags(mean, query, named):
    """Issue 53: the gate names its field; the command layer names the flag, or the profile it came from."""
    from autotune.commands.argtypes import result_gate
    from autotune.errors import OptionsError, SettingError
    from autotune.gates.scope import ResultGate

    with pytest.raises(SettingError) as raw:
        ResultGate(mean, query)
    assert "--" not in str(raw.value)
    with pytest.raises(OptionsError, match=f"^{named} must be above 0"):
        result_gate(mean, query)
    with pytest.raises(OptionsError, match=r"^the profile's result gate's min_"):
        result_gate(mean, query, source="the profile's result gate")
