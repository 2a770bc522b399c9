"""`tei`: `autotune serve` beside Hindsight, reached through its TEI client (any Hindsight ≥ 0.7.2)."""

from __future__ import annotations

from typing import ClassVar

from autotune.runtime.engine import EngineConfig, EngineTraits
from autotune.runtime.targets.base import PREFIX, EnvContext, SpaceLimits, Target, flag, no_max_tokens
from autotune.search.space import SearchSpace

TEI_MAX_BATCH_TOKENS = 16384  # TEI's own default for --max-batch-tokens
TEI_CONFIG_KEYS = ("AUTOTUNE_BATCH_SIZE", "AUTOTUNE_INTRA_OP_THREADS", "AUTOTUNE_LENGTH_SORT",
                   "AUTOTUNE_PRECISION", "AUTOTUNE_GRAPH", "AUTOTUNE_SPINNING", "AUTOTUNE_WORKERS", "AUTOTUNE_MODEL")


class TeiTarget(Target):
    name = "tei"
    provider = "tei"
    summary = "autotune serve as a TEI-compatible sidecar (older Hindsight, shared rerankers)"
    config_keys: ClassVar[tuple[str, ...]] = TEI_CONFIG_KEYS

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
            "AUTOTUNE_BATCH_SIZE": str(config.batch_size),
            "AUTOTUNE_INTRA_OP_THREADS": str(config.intra_op_threads),
            "AUTOTUNE_LENGTH_SORT": flag(config.length_sort),
            "AUTOTUNE_PRECISION": config.precision,
            "AUTOTUNE_GRAPH": config.graph,
            "AUTOTUNE_SPINNING": flag(config.spinning),
            "AUTOTUNE_WORKERS": str(config.workers),
            "AUTOTUNE_MODEL": ctx.model_ref,
            "AUTOTUNE_MAX_CLIENT_BATCH_SIZE": str(max(1024, ctx.tei_batch_size)),
            "AUTOTUNE_MAX_BATCH_TOKENS": str(TEI_MAX_BATCH_TOKENS),
        }
