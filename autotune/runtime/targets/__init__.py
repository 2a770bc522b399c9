"""The targets autotune tunes for: one registry, one place that names the valid ones.

The names are known without importing a target (so `--target` has its choices, and `--help` stays
fast); a target's module, with numpy and onnxruntime behind it, loads when `get_target` asks for it.
A new target is a module in this package and a line in `_REGISTRY`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from autotune.errors import OptionsError

if TYPE_CHECKING:
    from autotune.runtime.targets.base import Target

_REGISTRY: dict[str, tuple[str, str]] = {
    "onnx": ("autotune.runtime.targets.hindsight_onnx", "OnnxTarget"),
    "tei": ("autotune.runtime.targets.tei_sidecar", "TeiTarget"),
    "local": ("autotune.runtime.targets.hindsight_local", "LocalTarget"),
}
TARGET_NAMES: tuple[str, ...] = tuple(_REGISTRY)
DEFAULT_TARGET = "onnx"


def target_class(name: str) -> type[Target]:
    try:
        module, cls = _REGISTRY[name]
    except KeyError:
        raise OptionsError(f"unknown target {name!r}; choose from {', '.join(TARGET_NAMES)}") from None
    return getattr(import_module(module), cls)


def get_target(name: str) -> Target:
    return target_class(name)()


_BASE_NAMES = ("EnvContext", "SpaceLimits", "Target", "hindsight_native_threads")


def __getattr__(name: str) -> Any:
    """The base names (`Target`, `EnvContext`, ...) load with the base module, on first use."""
    if name in _BASE_NAMES:
        return getattr(import_module("autotune.runtime.targets.base"), name)
    if name == "TARGETS":
        return {n: target_class(n) for n in TARGET_NAMES}
    raise AttributeError(name)


__all__ = ["DEFAULT_TARGET", "TARGETS", "TARGET_NAMES", "EnvContext", "SpaceLimits", "Target", "get_target",
           "hindsight_native_threads", "target_class"]
