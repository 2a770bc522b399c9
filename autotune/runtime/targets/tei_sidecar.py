"""`tei`: `autotune serve` beside Hindsight, reached through its TEI client (any Hindsight ≥ 0.7.2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from autotune.runtime.engine import MAX_THREADS, EngineConfig, EngineTraits
from autotune.runtime.space import SearchSpace
from autotune.runtime.targets.base import PREFIX, EnvContext, SpaceLimits, Target, no_max_tokens
from autotune.runtime.targets.key_spec import URL, KeySpec, choice, integer, positive_int
from autotune.runtime.targets.sidecar_keys import MIN_CLIENT_BATCH, SIDECAR_SPEC, TEI_MAX_BATCH_TOKENS, SidecarKeys

TEI_CONFIG_KEYS = ("AUTOTUNE_BATCH_SIZE", "AUTOTUNE_INTRA_OP_THREADS", "AUTOTUNE_LENGTH_SORT",
                   "AUTOTUNE_PRECISION", "AUTOTUNE_GRAPH", "AUTOTUNE_SPINNING", "AUTOTUNE_WORKERS", "AUTOTUNE_MODEL")


CLIENT_CONCURRENCY_KEY = f"{PREFIX}TEI_MAX_CONCURRENT"
HINDSIGHT_CLIENT_CONCURRENCY = 8  # Hindsight's default TEI_MAX_CONCURRENT


def client_concurrency(user_env: Mapping[str, str]) -> int:
    """How many requests Hindsight's TEI client keeps in flight: the user's TEI_MAX_CONCURRENT, else its default."""
    return positive_int(user_env.get(CLIENT_CONCURRENCY_KEY)) or HINDSIGHT_CLIENT_CONCURRENCY


class TeiTarget(Target):
    name = "tei"
    provider = "tei"
    summary = "autotune serve as a TEI-compatible sidecar (older Hindsight, shared rerankers)"
    config_keys: ClassVar[tuple[str, ...]] = TEI_CONFIG_KEYS
    env_spec: ClassVar[Mapping[str, KeySpec]] = {
        f"{PREFIX}PROVIDER": choice("tei"),
        f"{PREFIX}TEI_URL": URL,
        f"{PREFIX}TEI_BATCH_SIZE": integer(1),
        f"{PREFIX}TEI_MAX_CONCURRENT": integer(1, MAX_THREADS),
        f"{PREFIX}TEI_HTTP_TIMEOUT": integer(1),
        **SIDECAR_SPEC,
    }
    env_names: ClassVar[tuple[str, ...]] = tuple(env_spec)
    sidecar = True
    server_module = "autotune.serve.app"
    concurrent = True
    defaults_label = "onnxruntime, batch 32, no sort, fp32, default threads"
    defaults_reference = "ort-default"
    bench_against = ("ort-default", "hindsight-onnx", "hindsight-local")

    def load_concurrency(self, requested: int | None, user_env: Mapping[str, str]) -> int:
        """Timed under the load Hindsight's TEI client sends, unless the user names another."""
        return requested or client_concurrency(user_env)

    def traits(self, usable_cores: int, max_length: int, max_tokens: int | None = None) -> EngineTraits:
        """The sidecar cuts batches by TEI's token budget as well as by count, as `serve` does."""
        no_max_tokens(self.name, max_tokens)
        return EngineTraits(sort_key="tokens", zero_threads=0, max_batch_tokens=TEI_MAX_BATCH_TOKENS)

    def space(self, limits: SpaceLimits) -> SearchSpace:
        """The sidecar owns its sessions, so spinning is a knob (busy-waiting steals time on shared hosts),
        and so is how many requests it serves at once, each on its own session."""
        return super().space(limits).narrowed(spinning=(True, False),
                                              workers=tuple(range(1, limits.usable_cores + 1)))

    def env_keys(self, config: EngineConfig, ctx: EnvContext) -> dict[str, str]:
        return {
            f"{PREFIX}PROVIDER": self.provider,
            f"{PREFIX}TEI_URL": ctx.tei_url,
            f"{PREFIX}TEI_BATCH_SIZE": str(ctx.tei_batch_size),
            **ctx.client_keys,
            **SidecarKeys(config, model=ctx.model_ref,
                          max_client_batch_size=max(MIN_CLIENT_BATCH, ctx.tei_batch_size),
                          max_input_length=ctx.served_max_length).to_env(),
        }
