"""The targets autotune tunes for: one registry, one place that names the valid ones."""

from __future__ import annotations

from autotune.errors import OptionsError
from autotune.runtime.targets.base import EnvContext, SpaceLimits, Target, hindsight_native_threads
from autotune.runtime.targets.hindsight_local import LocalTarget
from autotune.runtime.targets.hindsight_onnx import OnnxTarget
from autotune.runtime.targets.tei_sidecar import TeiTarget

TARGETS: dict[str, type[Target]] = {t.name: t for t in (OnnxTarget, TeiTarget, LocalTarget)}
DEFAULT_TARGET = "onnx"


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]()
    except KeyError:
        raise OptionsError(f"unknown target {name!r}; choose from {', '.join(TARGETS)}") from None


__all__ = ["DEFAULT_TARGET", "TARGETS", "EnvContext", "SpaceLimits", "Target", "get_target",
           "hindsight_native_threads"]
