"""The per-host YAML profile users commit, and the `.env` keys derived from it.

A profile holds hashes and counts of the workload, never its text.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import platform
import re
from pathlib import Path
from typing import Any

import yaml

from autotune.errors import OptionsError
from autotune.fileio import read_regular, write_atomic
from autotune.runtime.engine import EngineConfig

SCHEMA = 1
DEFAULT_TEI_URL = "http://reranker:8080"
HINDSIGHT_MAX_CANDIDATES = 300


def profile_name(brand: str, usable_cores: int, fingerprint: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", brand.lower()).strip("-")[:40] or "cpu"
    return f"{slug}-{usable_cores}c-{fingerprint[:8]}"


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("autotune", "onnxruntime", "optuna", "tokenizers", "numpy"):
        with contextlib.suppress(PackageNotFoundError):
            out[pkg] = version(pkg)
    return out


class _NoAliasDumper(yaml.SafeDumper):
    """A value that appears twice is written twice: `load_profile` refuses aliases (a "billion laughs" guard)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render_profile(data: dict[str, Any]) -> str:
    return ("# autotune profile: commit this file; regenerate with `autotune run`\n"
            + yaml.dump(data, Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True))


def profile_path(directory: Path, name: str) -> Path:
    return Path(directory) / f"{name}.yaml"


def write_profile(directory: Path, name: str, data: dict[str, Any]) -> Path:
    path = profile_path(directory, name)
    write_atomic(path, render_profile(data))
    return path


class _NoAliasLoader(yaml.SafeLoader):
    """Profiles never need anchors; refusing aliases stops a "billion laughs" document cold."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.events.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "YAML aliases are not allowed in a profile",
                                              self.peek_event().start_mark)
        return super().compose_node(parent, index)


MAPPINGS = ("host", "config", "model", "metrics", "search", "noise", "workload", "parity")
MAX_PROFILE_BYTES = 8 * 1024 * 1024  # a run's profile is tens of KB; a 200 MB one took 55 s and 811 MB to parse


def load_profile(path: Path) -> dict[str, Any]:
    """A profile, read as a regular file within its size limit (a `/dev/zero` or a FIFO named `*.yaml` is refused
    unread) and parsed with no YAML aliases."""
    raw = read_regular(Path(path), MAX_PROFILE_BYTES, what="profile", error=OptionsError)
    try:
        data = yaml.load(raw.decode("utf-8"), Loader=_NoAliasLoader)
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise OptionsError(f"profile {path} is not readable YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or "config" not in data:
        raise OptionsError(f"profile {path} is not an autotune profile (schema {SCHEMA})")
    for key in MAPPINGS:
        if key in data and not isinstance(data[key], dict):
            raise OptionsError(f"profile {path}: `{key}` must be a mapping, not {type(data[key]).__name__}")
    for key in ("isa", "cores"):
        value = data.get("host", {}).get(key)
        if value is not None and not isinstance(value, dict):
            raise OptionsError(f"profile {path}: `host.{key}` must be a mapping, not {type(value).__name__}")
    return data


def profile_max_tokens(data: dict[str, Any]) -> int | None:
    """The onnx target's truncation as the profile was tuned with it (`--max-tokens`); None elsewhere."""
    from autotune.runtime.targets import get_target

    model = data.get("model")
    return get_target(profile_target(data)).tuned_max_tokens(model if isinstance(model, dict) else {})


def profile_config(data: dict[str, Any]) -> EngineConfig:
    c = data["config"]
    if not isinstance(c, dict):
        raise OptionsError("profile config is not a mapping")
    try:
        return EngineConfig.from_dict(c)
    except (KeyError, TypeError, ValueError) as exc:
        raise OptionsError(f"profile config is incomplete or invalid: {exc}") from exc


def profile_target(data: dict[str, Any]) -> str:
    """The target the profile was tuned for, one the registry knows. Profiles written before targets existed
    were all for the `tei` sidecar, and their `env` shows it (its `AUTOTUNE_*` keys); any other profile with
    no target is refused rather than guessed at."""
    from autotune.runtime.targets import TARGET_NAMES

    target = data.get("target")
    if target is None:
        env = data.get("env")
        if isinstance(env, dict) and "AUTOTUNE_BATCH_SIZE" in env:
            return "tei"
        raise OptionsError("the profile names no target (onnx, tei or local): rerun autotune run")
    if target not in TARGET_NAMES:
        raise OptionsError(f"the profile's target {target!r} is unknown; choose from {', '.join(TARGET_NAMES)}")
    return str(target)


def tei_batch_size(existing_env: dict[str, str], max_candidates: int) -> int:
    """Big enough that one recall is one request, even where the user raised Hindsight's caps."""
    caps = [HINDSIGHT_MAX_CANDIDATES, max_candidates]
    for suffix in ("", "_LOW", "_MID", "_HIGH"):
        value = existing_env.get(f"HINDSIGHT_API_RERANKER_MAX_CANDIDATES{suffix}", "")
        if value.strip().isdigit():
            caps.append(int(value))
    return max(caps)


def check_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}", name):
        raise OptionsError(f"profile name {name!r} must be letters, digits, '.', '_' or '-'")
    return name


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
