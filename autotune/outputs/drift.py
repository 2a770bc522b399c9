"""`autotune check`: does this host (and its `.env`) still match a profile?"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autotune.host import HostInfo
from autotune.outputs.envfile import managed_values
from autotune.outputs.profile import profile_config, profile_target
from autotune.runtime.targets.key_spec import env_texts

ADVICE = "rerun autotune run"


def check_profile(profile: dict[str, Any], host: HostInfo, *, env_file: Path | None = None,
                  model_dir: Path | None = None, emitted: bool = False, model_out: Path | None = None) -> list[str]:
    """One line per difference, each with advice. Empty means the profile applies here. With `emitted`, every
    file Hindsight loads must be here, byte for byte: those the `.env` names, else the profile's directory as
    `apply` places it (`check`; `apply` itself verifies or rebuilds the directory, which is what it is for)."""
    drifts: list[str] = []
    recorded = _mapping(profile.get("host"))
    config = profile_config(profile)
    isa = _mapping(recorded.get("isa"))
    for flag, had in isa.items():
        has = host.isa.get(flag, False)
        if had and not has:
            hint = f"profile chose {config.precision}" if config.precision == "int8" else "profile was tuned"
            drifts.append(f"{hint} on a host with {flag}; this host has none: {ADVICE}")
        elif has and not had:
            drifts.append(f"this host has {flag}, which the profile's host lacked: {ADVICE} to use it")
    usable = _mapping(recorded.get("cores")).get("usable")
    if usable is not None and usable != host.cores.usable:
        drifts.append(f"profile was tuned with {usable} usable cores; this host has {host.cores.usable} "
                      f"(affinity and cgroup quota): {ADVICE}")
    if config.intra_op_threads > host.cores.usable:
        drifts.append(f"profile uses {config.intra_op_threads} intra-op threads; only {host.cores.usable} "
                      f"cores are usable here: {ADVICE}")
    elif config.workers > 1 and config.workers * (config.intra_op_threads or usable or 1) > host.cores.usable:
        drifts.append(f"profile serves {config.workers} workers x {config.intra_op_threads or 'all'} threads; only "
                      f"{host.cores.usable} cores are usable here: {ADVICE}")
    ort = recorded.get("onnxruntime")
    if ort and ort != host.onnxruntime:
        drifts.append(f"profile was measured with onnxruntime {ort}; this host has {host.onnxruntime}: {ADVICE}")
    model = _mapping(profile.get("model"))
    bundle = _current_model(profile, model_dir)
    sha = bundle.sha256
    if sha is not None and model.get("sha256") and sha != model["sha256"]:
        drifts.append(f"model sha256 is {sha[:12]}, the profile's is {str(model['sha256'])[:12]}: {ADVICE}")
    if env_file is not None:
        drifts += _env_drift(profile, config, env_file)
        if env_file.exists():
            from autotune.outputs.envfile import effective_values

            said = " ".join(drifts)  # a block key already reported is not reported twice
            drifts += [f"{env_file}: {line}: {ADVICE}" for line in
                       env_problems(profile, effective_values(env_file), host, positions=bundle.max_length)
                       if line.split(" ", 1)[0] not in said]
    if emitted:
        drifts += emitted_drift(profile, env_file=env_file, model_out=model_out)
    return drifts


def emitted_drift(profile: dict[str, Any], *, env_file: Path | None = None, model_out: Path | None = None
                  ) -> list[str]:
    """Every file Hindsight loads against the sha256 the run recorded for it. With an `.env`, the files its keys
    name (a key the user set outside the block wins, as in Hindsight); with a container path, the host's
    directory that is mounted there."""
    from autotune.outputs.envfile import effective_values
    from autotune.outputs.model_files import expected_files, files_drift, local_model_dir
    from autotune.runtime.targets import get_target

    target = get_target(profile_target(profile))
    model = _mapping(profile.get("model"))
    expected = expected_files(model)
    directory = target.model_dir(lambda: local_model_dir(profile, model_out, reading=True))
    if directory is None or not expected:
        return []  # a sidecar profile, or one written before autotune recorded it
    model_file: Path | None = None
    if env_file is not None and env_file.exists() and not model.get("path_in_container") and model_out is None:
        located = target.loaded_from(effective_values(env_file))
        if located is None:
            return [f"{env_file} names no model for Hindsight's `{target.provider}` provider to load: {ADVICE}"]
        model_file, directory = located
    return [f"the model Hindsight loads: {line}: copy the model directory the run wrote, run `autotune apply`, "
            f"or {ADVICE}" for line in files_drift(expected, directory=directory, model_file=model_file)]


def _current_model(profile: dict[str, Any], model_dir: Path | None) -> Any:
    from autotune.runtime.targets import get_target

    ref = model_dir if model_dir is not None else (profile.get("model") or {}).get("ref", "default")
    return get_target(profile_target(profile)).load_model(ref)


def model_positions(profile: dict[str, Any], model_dir: Path | None = None) -> int:
    """The longest input the profile's model takes, from the model itself (a profile's record may be edited)."""
    return int(_current_model(profile, model_dir).max_length)


def env_problems(profile: dict[str, Any], values: Mapping[str, str], host: HostInfo, *,
                 positions: int | None) -> list[str]:
    """The values Hindsight would run with (`values`, of the profile's target's keys) that this host or model
    cannot run, or that contradict the profile's configuration; one line each, naming the key."""
    from autotune.runtime.targets import get_target

    target = get_target(profile_target(profile))
    keys = {k: str(v) for k, v in values.items() if k in target.env_spec}
    return target.env_problems(keys, profile_config(profile), positions=positions, cores=host.cores.usable)


def expected_env(profile: dict[str, Any], config: Any) -> tuple[dict[str, str], tuple[str, ...]]:
    """The keys the profile's run wrote (older profiles: recomputed for the `tei` sidecar they all were)."""
    from autotune.runtime.targets import EnvContext, get_target

    target = get_target(profile_target(profile))
    recorded = profile.get("env")
    if isinstance(recorded, dict):
        return env_texts(recorded), target.config_keys
    ctx = EnvContext(model_ref=str(profile.get("model", {}).get("ref", "default")), model_dir=None, tei_url="",
                     tei_batch_size=0, max_tokens=0, usable_cores=1)
    return target.env_keys(config, ctx), target.config_keys


def _env_drift(profile: dict[str, Any], config: Any, env_file: Path) -> list[str]:
    if not env_file.exists():
        return [f"{env_file} does not exist: rerun autotune run"]
    block = managed_values(env_file)
    if not block:
        return [f"{env_file} has no autotune block: rerun autotune run"]
    want, keys = expected_env(profile, config)
    return [f"{env_file}: {key} differs from the profile's configuration: rerun autotune run"
            for key in keys if key in block and key in want and block[key] != want[key]]


def _mapping(value: object) -> dict[str, Any]:
    """A hand-edited profile may hold anything: what is not a mapping counts as absent."""
    return value if isinstance(value, dict) else {}
