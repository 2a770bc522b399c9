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
