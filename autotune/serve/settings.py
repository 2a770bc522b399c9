"""What `serve` runs with: a profile, or the `AUTOTUNE_*` keys of a `.env` and the environment, checked at
start so that a bad value is one line and exit 4, never a server that answers 503 forever."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autotune.errors import OptionsError
from autotune.outputs.profile import load_profile, profile_config
from autotune.runtime.engine import EngineConfig
from autotune.runtime.targets.sidecar_keys import TEI_MAX_BATCH_TOKENS, SidecarKeys

CLIENT_TIMEOUT_KEYS = ("AUTOTUNE_CLIENT_TIMEOUT", "HINDSIGHT_API_RERANKER_TEI_HTTP_TIMEOUT")
DEFAULT_CLIENT_TIMEOUT_S = 30.0  # Hindsight's TEI_HTTP_TIMEOUT



@dataclass(frozen=True)
class ServeSettings:
    config: EngineConfig
    model: str = "default"
    max_client_batch_size: int = 1024
    max_queue: int = 16
    max_body_bytes: int = 8 * 1024 * 1024  # TEI's --payload-limit
    max_batch_tokens: int = TEI_MAX_BATCH_TOKENS  # rows x longest per batch: bounds each batch's memory
    max_input_length: int | None = None  # tokens per input (None: the model's); bounds the longest batch's memory
    auto_truncate: bool = True
    raw_scores_default: bool = False  # true for Hindsight <= 0.6.2, which applies sigmoid itself
    client_timeout_s: float = DEFAULT_CLIENT_TIMEOUT_S  # past this wait a request is refused, not queued
    body_timeout_s: float = 10.0  # a body that has not arrived whole by then is 408: slow uploads hold no slot
    api_key: str | None = None  # TEI's --api-key: /rerank, /info and /metrics want `Authorization: Bearer KEY`

    def __post_init__(self) -> None:
        if not (math.isfinite(self.body_timeout_s) and self.body_timeout_s > 0):
            raise OptionsError(f"the body time-out must be a positive number of seconds, got {self.body_timeout_s}")
        if self.api_key is not None and not self.api_key.strip():
            raise OptionsError("the API key must not be empty")
        if not (math.isfinite(self.client_timeout_s) and self.client_timeout_s > 0):
            raise OptionsError(f"the client time-out must be a positive number of seconds, got {self.client_timeout_s}")
        for name in ("max_client_batch_size", "max_queue", "max_body_bytes", "max_batch_tokens", "max_input_length"):
            if (value := getattr(self, name)) is not None and value < 1:
                key = {"max_client_batch_size": "AUTOTUNE_MAX_CLIENT_BATCH_SIZE", "max_queue": "AUTOTUNE_MAX_QUEUE",
                       "max_body_bytes": "the body limit", "max_batch_tokens": "AUTOTUNE_MAX_BATCH_TOKENS",
                       "max_input_length": "AUTOTUNE_MAX_INPUT_LENGTH"}[name]
                raise OptionsError(f"{key} must be at least 1, got {value}")


def settings_from_profile(path: Path) -> ServeSettings:
    """The profile's configuration, with the limits its run wrote for the sidecar (the burst it measured under
    them is the memory figure it states)."""
    data = load_profile(path)
    found = data.get("env")
    env: dict[str, str] = found if isinstance(found, dict) else {}
    keys = SidecarKeys.from_env(env) if "AUTOTUNE_BATCH_SIZE" in env else None
    model = str(data.get("model", {}).get("ref", "default"))
    if keys is None:
        return ServeSettings(config=profile_config(data), model=model, client_timeout_s=client_timeout(env))
    return ServeSettings(config=profile_config(data), model=model, client_timeout_s=client_timeout(env),
                         max_batch_tokens=keys.max_batch_tokens, max_input_length=keys.max_input_length)


def client_timeout(env: Mapping[str, str]) -> float:
    """AUTOTUNE_CLIENT_TIMEOUT, else the time-out Hindsight's TEI client was given, else its default."""
    for key in CLIENT_TIMEOUT_KEYS:
        value = env.get(key)
        if value is not None and value != "":
            try:
                return float(value)
            except ValueError:
                raise OptionsError(f"{key} must be a number of seconds, got {value!r}") from None
    return DEFAULT_CLIENT_TIMEOUT_S


def settings_from_env(env: Mapping[str, str]) -> ServeSettings:
    """The AUTOTUNE_* keys of a `.env` (or the container environment it was loaded into)."""
    keys = SidecarKeys.from_env(env)
    return ServeSettings(config=keys.config, model=keys.model, max_client_batch_size=keys.max_client_batch_size,
                         max_queue=keys.max_queue, max_batch_tokens=keys.max_batch_tokens,
                         max_input_length=keys.max_input_length,
                         raw_scores_default=keys.raw_scores, client_timeout_s=client_timeout(env))


def resolve_settings(profile: Path | None, env_file: Path | None,
                     environ: Mapping[str, str] | None = None) -> ServeSettings:
    """--profile wins; else the AUTOTUNE_* keys of --env-file, overridden by the environment."""
    if profile is not None:
        return settings_from_profile(profile)
    merged: dict[str, str] = {}
    if env_file is not None:
        from autotune.outputs.envfile import parse_env, read_text_exact

        if not env_file.exists():
            raise OptionsError(f"env file {env_file} does not exist")
        merged.update(parse_env(read_text_exact(env_file)))
    merged.update({k: v for k, v in (os.environ if environ is None else environ).items()
                   if k.startswith("AUTOTUNE_") or k in CLIENT_TIMEOUT_KEYS})
    return settings_from_env(merged)
