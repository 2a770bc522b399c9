"""autotune: pick the fastest safe cross-encoder configuration for this CPU host.

The public names load on first use (PEP 562), so `import autotune` and `autotune --help` pull in no
numpy, onnx, onnxruntime or optuna.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_PUBLIC = {
    "AutotuneError": "autotune.errors",
    "ExitStatus": "autotune.errors",
    "HostInfo": "autotune.host",
    "HostProbe": "autotune.host",
    "BASELINE": "autotune.runtime.engine",
    "EngineConfig": "autotune.runtime.engine",
    "RerankEngine": "autotune.runtime.engine",
    "Workload": "autotune.workload.queries",
    "load_workload": "autotune.workload.queries",
}
__all__ = sorted(_PUBLIC)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")
