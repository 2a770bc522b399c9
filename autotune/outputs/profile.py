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
from autotune.fileio import write_atomic
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


def write_profile(directory: Path, name: str, data: dict[str, Any]) -> Path:
    path = Path(directory) / f"{name}.yaml"
    write_atomic(path, "# autotune profile: commit this file; regenerate with `autotune run`\n"
                 + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def load_profile(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise OptionsError(f"profile {path} does not exist") from exc
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise OptionsError(f"profile {path} is not readable YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or "config" not in data:
        raise OptionsError(f"profile {path} is not an autotune profile (schema {SCHEMA})")
    return data


def profile_config(data: dict[str, Any]) -> EngineConfig:
    c = data["config"]
    if not isinstance(c, dict):
        raise OptionsError("profile config is not a mapping")
    try:
        return EngineConfig.from_dict(c)
    except (KeyError, TypeError, ValueError) as exc:
        raise OptionsError(f"profile config is incomplete: {exc}") from exc


def profile_target(data: dict[str, Any]) -> str:
    """Profiles written before targets existed were all for the `tei` sidecar."""
    return str(data.get("target", "tei"))


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
