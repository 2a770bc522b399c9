"""argparse value types shared by several commands; each rejects bad text with one line."""

from __future__ import annotations

import argparse
import math
from typing import Any

from autotune.errors import OptionsError, SettingError
from autotune.gates.scope import ResultGate

GATE_FLAGS = {"min_mean": "--min-result-agreement", "min_query": "--min-query-agreement"}


def result_gate(min_mean: Any, min_query: Any, *, source: str | None = None) -> ResultGate:
    """The result gate, a bad floor named by its flag (or by `source`, where it came from a profile)."""
    try:
        return ResultGate(min_mean, min_query)
    except SettingError as exc:
        where = GATE_FLAGS[exc.field] if source is None else f"{source}'s {exc.field}"
        raise OptionsError(f"{where} {exc.problem}") from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


MAX_CONCURRENCY = 256  # recalls at once: past Hindsight's 32 in flight, and each is a thread of the tuner's


def concurrency(text: str) -> int:
    value = positive_int(text)
    if value > MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_CONCURRENCY} recalls at once, got {value}")
    return value


def int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def non_negative_float(text: str) -> float:
    """A finite number of 0 or more (seconds to wait, say)."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """A float that is neither NaN nor infinite: NaN compares false with everything and slips past checks."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def http_url(text: str) -> str:
    """An http(s) URL Hindsight's client can reach (`http://[::1]:8080` included), parsed as one."""
    from autotune.runtime.targets.key_spec import url_problem

    problem = url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return text
