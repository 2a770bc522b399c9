"""autotune: pick the fastest safe cross-encoder configuration for this CPU host."""

from __future__ import annotations

from autotune.errors import AutotuneError, ExitStatus
from autotune.host import HostInfo, HostProbe
from autotune.runtime.engine import BASELINE, EngineConfig, RerankEngine
from autotune.workload.queries import Workload, load_workload

__all__ = [
    "BASELINE",
    "AutotuneError",
    "EngineConfig",
    "ExitStatus",
    "HostInfo",
    "HostProbe",
    "RerankEngine",
    "Workload",
    "load_workload",
]
__version__ = "0.1.0"
