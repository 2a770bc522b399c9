"""`autotune helm`: the values override's keys are the chart's, round-tripped through YAML."""

from __future__ import annotations

import math

from autotune.outputs.helm_values import (
    HEADROOM,
    PROCESS_MB,
    memory_limit_mib,
)
from tests.support.profiles import tei_profile


def test_the_memory_limit_holds_the_measured_burst():
    """The burst is every worker at once on the longest input, measured: counted as it is. A profile written before
    it carries one session's need, counted once per worker."""
    old = tei_profile()
    burst = {**old, "memory": {"served_mb": 250.0, "burst": {"added_mb": 900.0}}}
    assert memory_limit_mib(old) == math.ceil((PROCESS_MB + 2 * 250.0) * HEADROOM / 64) * 64
    assert memory_limit_mib(burst) == math.ceil((PROCESS_MB + 900.0) * HEADROOM / 64) * 64


