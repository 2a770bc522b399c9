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
from autotune.outputs.model_files import expected_files, files_drift
from autotune.outputs.ownership import check_model_out

if TYPE_CHECKING:
    from autotune.host import HostInfo
    from autotune.runtime.targets import Target


def restore_model(profile: dict[str, Any], host: HostInfo, target: Target, destination: Path
                  ) -> tuple[StagedModel | None, list[str]]:
    """The profile's model directory at `destination` (for a target that emits one: `Target.model_dir`): kept
    when every file Hindsight loads is what the run wrote; rebuilt, staged and verified when it is missing, or
    when it is autotune's own and damaged."""
    model = profile.get("model") or {}
    expected = expected_files(model)
    ship = f"copy the model directory from the host that ran `autotune run` to {destination}/ (or rerun it here)"
    damage: list[str] = []
    if destination.is_symlink() or destination.exists():
        check_model_out(destination)  # a directory autotune did not write is never replaced
        if not expected:
            return None, [f"{destination}/ is kept as it is: the profile (written before autotune recorded its "
                          "files) cannot verify it"]
        damage = files_drift(expected, directory=destination)
        if not damage:
            return None, [f"{destination}/: every file Hindsight loads matches the run's sha256"]
    elif not expected:
        raise OptionsError(f"the model directory {destination} is not on this host and the profile (written before "
                           f"autotune recorded its sha256) cannot verify a rebuild: {ship}")
    check_model_out(destination)
    staged = _rebuild(profile, host, target, destination, ship)
    wrong = files_drift(expected, directory=staged.staging)
    if wrong:
        staged.discard()
        raise OptionsError(f"the model rebuilt from the profile's recipe differs from the run's ("
                           f"{wrong[0].replace(str(staged.staging), str(destination))}; another onnx or onnxruntime "
                           f"builds other bytes): {ship}")
    what = f"was damaged ({damage[0]}; {len(damage)} file(s) in all)" if damage else "was not on this host"
    return staged, [f"{destination}/ {what}: rebuilt from the profile's recipe; every file matches the run's sha256"]


def _rebuild(profile: dict[str, Any], host: HostInfo, target: Target, destination: Path, ship: str) -> StagedModel:
    from autotune.outputs.profile import profile_config, profile_max_tokens
    from autotune.runtime.backends import inspect_graph
    from autotune.runtime.engine import onnx_pool
    from autotune.runtime.quantize import Int8Variant

    model = profile.get("model") or {}
    ref = str(model.get("ref", "default"))
    bundle = target.load_model(ref)
    if model.get("sha256") and bundle.sha256 != model["sha256"]:
        raise OptionsError(f"the source model here ({ref}) has sha256 {bundle.sha256[:12]}, the profile's is "
                           f"{str(model['sha256'])[:12]}: {ship}")
    pool = target.pool(bundle, has_vnni=host.has_vnni, usable_cores=host.cores.usable,
                       max_tokens=profile_max_tokens(profile))
    onnx = onnx_pool(pool)
    if onnx is not None:  # profiles before variants ran per-tensor
        onnx.use_int8(Int8Variant.from_dict(model.get("int8_variant")))
    max_tokens = int(model.get("max_tokens") or bundle.max_length)
    return stage_model_dir(destination, onnx_file=pool.model_path(profile_config(profile)) or bundle.onnx_path,
                           source_dir=bundle.directory, input_names=inspect_graph(bundle.onnx_path)[0],
                           max_tokens=max_tokens, owner=str(profile.get("name", destination.name)),
                           torch_dir=pool.checkpoint)
