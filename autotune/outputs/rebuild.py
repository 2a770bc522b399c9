"""The model directory a profile's run emitted, rebuilt on another node of the same type from the profile's recipe.

A fleet commits `profiles/`, not `models/` (tens of MB per host type). The profile records what the run
built: the source model's sha256, the configuration's graph (plain or fused) and precision (with the int8
format the host's ISA decides), the truncation, and the emitted `model.onnx`'s sha256. `apply` rebuilds the
directory through the same code the run used and keeps it only when it is byte-identical; otherwise it says
exactly what to ship.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import OptionsError
from autotune.outputs.model_dir import StagedModel, stage_model_dir
from autotune.outputs.ownership import check_model_out

if TYPE_CHECKING:
    from autotune.host import HostInfo
    from autotune.runtime.targets import Target


def restore_model(profile: dict[str, Any], host: HostInfo, target: Target) -> tuple[StagedModel | None, list[str]]:
    """The rebuilt directory, staged and verified, when the profile's is missing here; else notes."""
    model = profile.get("model") or {}
    directory, expected = model.get("dir"), model.get("emitted_sha256")
    if not target.emits_model or not directory:
        return None, []
    destination = Path(str(directory))
    if destination.is_dir():
        return None, []  # `autotune check` compares it with the profile, byte for byte
    ship = f"copy {destination}/ from the host that ran `autotune run` (or rerun it here)"
    if not expected:
        return None, [f"the model directory {destination} is not on this host and the profile (written before "
                      f"autotune recorded its sha256) cannot verify a rebuild: {ship}"]
    check_model_out(destination)
    staged = _rebuild(profile, host, target, destination, ship)
    if staged.sha256 != expected:
        staged.discard()
        raise OptionsError(f"the model rebuilt from the profile's recipe has sha256 {staged.sha256[:12]}, the "
                           f"profile's is {str(expected)[:12]} (another onnx or onnxruntime builds other "
                           f"bytes): {ship}")
    return staged, [f"rebuilt {destination}/ from the profile's recipe; model.onnx's sha256 matches the run's"]


def _rebuild(profile: dict[str, Any], host: HostInfo, target: Target, destination: Path, ship: str) -> StagedModel:
    from autotune.outputs.profile import profile_config, profile_max_tokens
    from autotune.runtime.backends import inspect_graph
    from autotune.runtime.model import resolve_model

    model = profile.get("model") or {}
    ref = str(model.get("ref", "default"))
    bundle = resolve_model(None if ref == "default" else Path(ref), stock=target.stock_default)
    if model.get("sha256") and bundle.sha256 != model["sha256"]:
        raise OptionsError(f"the source model here ({ref}) has sha256 {bundle.sha256[:12]}, the profile's is "
                           f"{str(model['sha256'])[:12]}: {ship}")
    pool = target.pool(bundle, has_vnni=host.has_vnni, usable_cores=host.cores.usable,
                       max_tokens=profile_max_tokens(profile))
    max_tokens = int(model.get("max_tokens") or bundle.max_length)
    return stage_model_dir(destination, onnx_file=pool.model_path(profile_config(profile)) or bundle.onnx_path,
                           source_dir=bundle.directory, input_names=inspect_graph(bundle.onnx_path)[0],
                           max_tokens=max_tokens, owner=str(profile.get("name", destination.name)),
                           torch_dir=pool.checkpoint)
