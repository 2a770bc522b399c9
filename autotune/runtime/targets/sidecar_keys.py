"""The `AUTOTUNE_*` keys `autotune serve` reads: written by the `tei` target, read by `serve`, here both ways.

One module owns them, so a key added on one side cannot be missed on the other; a test round-trips
every field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from autotune.errors import OptionsError
from autotune.runtime.engine import GRAPHS, MAX_BATCH_SIZE, MAX_THREADS, PRECISIONS, EngineConfig
from autotune.runtime.targets.base import flag
from autotune.runtime.targets.key_spec import BOOL, CORES, MAX_POSITIONS, PATH, POSITIONS, KeySpec, choice, integer

TEI_MAX_BATCH_TOKENS = 16384  # TEI's own default for --max-batch-tokens
DEFAULT_MAX_QUEUE = 16
MIN_CLIENT_BATCH = 1024
INPUT_LENGTH_KEY = "AUTOTUNE_MAX_INPUT_LENGTH"


def _is_true(value: str) -> bool:
    return value.lower() in ("true", "1")


@dataclass(frozen=True)
class SidecarKeys:
    """What the sidecar serves with, as its keys say."""

    config: EngineConfig
    model: str = "default"
    max_client_batch_size: int = MIN_CLIENT_BATCH
    max_batch_tokens: int = TEI_MAX_BATCH_TOKENS
    max_queue: int = DEFAULT_MAX_QUEUE
    raw_scores: bool = False
    max_input_length: int | None = None  # None: the model's own; shorter where its burst would pass the budget

    def to_env(self) -> dict[str, str]:
        c = self.config
        return {
            "AUTOTUNE_BATCH_SIZE": str(c.batch_size),
            "AUTOTUNE_INTRA_OP_THREADS": str(c.intra_op_threads),
            "AUTOTUNE_LENGTH_SORT": flag(c.length_sort),
            "AUTOTUNE_PRECISION": c.precision,
            "AUTOTUNE_GRAPH": c.graph,
            "AUTOTUNE_SPINNING": flag(c.spinning),
            "AUTOTUNE_WORKERS": str(c.workers),
            "AUTOTUNE_MODEL": self.model,
            "AUTOTUNE_MAX_CLIENT_BATCH_SIZE": str(self.max_client_batch_size),
            "AUTOTUNE_MAX_BATCH_TOKENS": str(self.max_batch_tokens),
            **({} if self.max_input_length is None else {INPUT_LENGTH_KEY: str(self.max_input_length)}),
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SidecarKeys:
        """The keys of a `.env` (or of the container environment it was loaded into); a missing or malformed
        required key is a one-line OptionsError."""
        def get(key: str, default: str | None = None) -> str:
            value = env.get(key, default)
            if value is None or value == "":
                raise OptionsError(f"{key} is not set: pass --profile, or an --env-file written by `autotune run`")
            return value

        def integer(key: str, default: str | None = None) -> int:
            try:
                return int(get(key, default))
            except ValueError:
                raise OptionsError(f"{key} must be an integer, got {env.get(key)!r}") from None

        config = EngineConfig(batch_size=integer("AUTOTUNE_BATCH_SIZE"),
                              intra_op_threads=integer("AUTOTUNE_INTRA_OP_THREADS"),
                              length_sort=_is_true(get("AUTOTUNE_LENGTH_SORT")),
                              precision=get("AUTOTUNE_PRECISION"), graph=get("AUTOTUNE_GRAPH", "plain"),
                              spinning=_is_true(get("AUTOTUNE_SPINNING", "true")),
                              workers=integer("AUTOTUNE_WORKERS", "1"))
        return cls(config=config, model=get("AUTOTUNE_MODEL", "default"),
                   max_client_batch_size=integer("AUTOTUNE_MAX_CLIENT_BATCH_SIZE", str(MIN_CLIENT_BATCH)),
                   max_batch_tokens=integer("AUTOTUNE_MAX_BATCH_TOKENS", str(TEI_MAX_BATCH_TOKENS)),
                   max_queue=integer("AUTOTUNE_MAX_QUEUE", str(DEFAULT_MAX_QUEUE)),
                   raw_scores=_is_true(env.get("AUTOTUNE_RAW_SCORES", "false")),
                   max_input_length=integer(INPUT_LENGTH_KEY) if env.get(INPUT_LENGTH_KEY) else None)


# what `to_env` writes
WRITTEN_KEYS = tuple(SidecarKeys(EngineConfig(1, 0, False, "fp32"), max_input_length=1).to_env())
# the type of each (a test holds the two to the same names)
SIDECAR_SPEC: dict[str, KeySpec] = {
    "AUTOTUNE_BATCH_SIZE": integer(1, MAX_BATCH_SIZE),
    "AUTOTUNE_INTRA_OP_THREADS": integer(0, MAX_THREADS, CORES),
    "AUTOTUNE_LENGTH_SORT": BOOL,
    "AUTOTUNE_PRECISION": choice(*PRECISIONS),
    "AUTOTUNE_GRAPH": choice(*GRAPHS),
    "AUTOTUNE_SPINNING": BOOL,
    "AUTOTUNE_WORKERS": integer(1, MAX_THREADS),
    "AUTOTUNE_MODEL": PATH,
    "AUTOTUNE_MAX_CLIENT_BATCH_SIZE": integer(1),
    "AUTOTUNE_MAX_BATCH_TOKENS": integer(1),
    INPUT_LENGTH_KEY: integer(1, MAX_POSITIONS, POSITIONS),
}
# every key the sidecar reads
READ_KEYS = ("AUTOTUNE_BATCH_SIZE", "AUTOTUNE_INTRA_OP_THREADS", "AUTOTUNE_LENGTH_SORT", "AUTOTUNE_PRECISION",
             "AUTOTUNE_GRAPH", "AUTOTUNE_SPINNING", "AUTOTUNE_WORKERS", "AUTOTUNE_MODEL",
             "AUTOTUNE_MAX_CLIENT_BATCH_SIZE", "AUTOTUNE_MAX_BATCH_TOKENS", "AUTOTUNE_MAX_QUEUE",
             "AUTOTUNE_RAW_SCORES", INPUT_LENGTH_KEY)
