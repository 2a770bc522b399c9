"""Loading what `bench` and `explain` both start from: a profile, a workload and this host."""

from __future__ import annotations

import argparse
from typing import Any

from autotune.host import default_probe
from autotune.outputs.profile import load_profile
from autotune.workload.queries import load_workload


def profile_workload_host(args: argparse.Namespace) -> tuple[dict[str, Any], Any, Any]:
    return load_profile(args.profile), load_workload(args.workload), default_probe().probe()
