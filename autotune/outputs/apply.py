"""Reuse a committed profile on another host of the same type: no measuring, the same files `run` wrote.

A fleet tunes one node per hardware type, commits the profiles, then applies them on every node.
A profile applies only where `check` finds no drift (same ISA, usable cores, onnxruntime, model);
otherwise the host needs its own run, unless the operator forces it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autotune.errors import DriftError, OptionsError
from autotune.fileio import StagedFiles
from autotune.hindsight.keys import SCOPE_SPEC
from autotune.host import HostInfo
from autotune.outputs.compose import check_container_path, render_for_profile
from autotune.outputs.drift import check_profile, env_problems, model_positions
from autotune.outputs.envfile import MergeResult, merge_env, read_text_exact
from autotune.outputs.model_files import local_model_dir
from autotune.outputs.ownership import check_compose_out, refuse_collisions
from autotune.outputs.profile import load_profile, profile_target
from autotune.outputs.rebuild import restore_model
from autotune.runtime.targets import get_target
from autotune.runtime.targets.key_spec import check_keys, env_texts
from autotune.signals import deferred_interrupts


@dataclass
class ApplyResult:
    profile_path: Path
    env: MergeResult
    compose_path: Path | None
    forced_drifts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def choose_profile(profiles_dir: Path, host: HostInfo) -> Path:
    """The profile in `profiles_dir` whose host fingerprint is this host's; none is exit 6 naming the closest."""
    paths = sorted(Path(profiles_dir).glob("*.yaml")) if Path(profiles_dir).is_dir() else []
    if not paths:
        raise OptionsError(f"{profiles_dir} holds no profiles (*.yaml)")
    candidates, matching = [], []
    for path in paths:
        profile = load_profile(path)
        if profile.get("host", {}).get("fingerprint") == host.fingerprint:
            matching.append(path)
        candidates.append((len(check_profile(profile, host)), path, profile))
    if len(matching) > 1:
        raise OptionsError(f"{profiles_dir} holds {len(matching)} profiles tuned on this host type "
                           f"({', '.join(p.name for p in matching)}): pass the one to apply with --profile")
    if matching:
        return matching[0]
    _, path, profile = min(candidates, key=lambda c: (c[0], str(c[1])))
    differs = "; ".join(check_profile(profile, host)) or "its host fingerprint differs"
    raise DriftError(f"no profile in {profiles_dir} was tuned on this host type ({host.fingerprint}); the closest is "
                     f"{path.name}: {differs}")


def apply_profile(path: Path, host: HostInfo, *, env_file: Path, compose_file: Path | None,
                  force: bool = False, model_out: Path | None = None) -> ApplyResult:
    """Write the profile's `.env` block (and the compose override `run` would write) when the host matches.

    The model directory is this node's (`model_out`, else as `local_model_dir` places it), verified file by
    file or rebuilt, and the `.env` names that one: the profile's own paths are the tuning host's."""
    profile = load_profile(path)
    drifts = check_profile(profile, host)
    if drifts and not force:
        raise DriftError("\n".join(f"drift: {line}" for line in drifts) + "\n(pass --force to apply it anyway)")
    keys = profile.get("env")
    if not isinstance(keys, dict) or not keys:
        raise OptionsError(f"profile {path} has no `env` keys (written before autotune 0.3): rerun autotune run")
    keys = env_texts(keys)
    target = get_target(profile_target(profile))
    # a profile is input: it may set exactly the keys its target writes, each of the type its reader takes
    check_keys(keys, {**target.env_spec, **SCOPE_SPEC}, source=f"profile {path}")
    problems = env_problems(profile, keys, host, positions=model_positions(profile))
    if problems:  # accepted by Hindsight's parser, and then failing (or oversubscribing) in it: refused
        raise OptionsError(f"profile {path}: {problems[0]} (refused: nothing was written)")
    container = (profile.get("model") or {}).get("path_in_container")
    if container is not None:
        check_container_path(str(container), source=f"profile {path}: model.path_in_container")
    model_dir = target.model_dir(lambda: local_model_dir(profile, model_out))
    if model_dir is not None and container is None:  # Hindsight on this host reads this node's directory
        keys.update(target.container_keys(str(model_dir.resolve())))
        check_keys(keys, target.env_spec, source=f"this node's model directory {str(model_dir)!r}")
    refuse_collisions({"--profile": path}, {"--env-file": env_file, "--compose-file": compose_file,
                                            "--model-out": model_dir}, model_out=model_dir)
    merge = merge_env(read_text_exact(env_file), keys)
    compose_text = (None if compose_file is None else
                    render_for_profile(profile, path, env_file=env_file, out=compose_file, model_dir=model_dir))
    if compose_text is not None and compose_file is not None:
        check_compose_out(compose_file)
    staged, notes = (None, []) if model_dir is None else restore_model(profile, host, target, model_dir)
    try:
        with deferred_interrupts(), StagedFiles() as files:
            files.add(env_file, merge.text.encode("utf-8", "surrogateescape"))
            if compose_text is not None and compose_file is not None:
                files.add(compose_file, compose_text)
            if staged is not None:
                staged.commit()
            files.commit()
    finally:
        if staged is not None:
            staged.discard()  # a no-op once committed
    return ApplyResult(path, merge, compose_file if compose_text is not None else None, drifts, notes)
