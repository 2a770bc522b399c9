"""The Hindsight keys that decide what its reranker is handed, whatever the provider: how many fused candidates
each budget level reranks, and how many tokens of each candidate. Parsed as Hindsight 1.1 parses them."""

from __future__ import annotations

from autotune.errors import OptionsError
from autotune.runtime.targets.key_spec import KeySpec, integer

PREFIX = "HINDSIGHT_API_RERANKER_"
LEVELS = ("low", "mid", "high")  # a recall's budget; a missing one is mid
DEFAULT_LEVEL = "mid"
MAX_CANDIDATES = f"{PREFIX}MAX_CANDIDATES"
DEFAULT_MAX_CANDIDATES = 300
TOKENS_PER_CANDIDATE = f"{PREFIX}MAX_TOKENS_PER_CANDIDATE"
TOKENIZER_ENCODING = "HINDSIGHT_API_TOKENIZER_ENCODING"
DEFAULT_ENCODING = "o200k_base"  # Hindsight 1.1's default


def level_key(level: str) -> str:
    return f"{MAX_CANDIDATES}_{level.upper()}"


# 0 per level means "use the flat value"; a flat 0 reranks nothing and a token cut of 0 cuts to nothing
SCOPE_SPEC: dict[str, KeySpec] = {MAX_CANDIDATES: integer(1), **{level_key(level): integer(0) for level in LEVELS},
                                  TOKENS_PER_CANDIDATE: integer(1)}
SCOPE_KEYS = tuple(SCOPE_SPEC)


def _int(env: dict[str, str], key: str) -> int | None:
    raw = env.get(key, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise OptionsError(f"{key} in the .env is not an integer, so Hindsight would not start") from None


def user_caps(env: dict[str, str]) -> dict[str, int]:
    """The pool cap the user's own `.env` lines fix per budget level (`_LOW/_MID/_HIGH` above 0 win over the
    flat value; 0 means "use the flat value"), only for levels where some key is set."""
    flat = _int(env, MAX_CANDIDATES)
    if flat is not None and flat < 1:
        raise OptionsError(f"{MAX_CANDIDATES}={flat} in the .env makes Hindsight rerank nothing: set it to 1 or more")
    caps = {}
    for level in LEVELS:
        value = _int(env, level_key(level))
        if value is not None and value < 0:
            raise OptionsError(f"{level_key(level)} in the .env must be 0 (the flat value) or more, got {value}")
        if value:
            caps[level] = value
        elif flat is not None:
            caps[level] = flat
    return caps


def pool_cap(caps: dict[str, int], budget: str | None) -> int:
    """How many fused candidates Hindsight reranks for a recall at this budget: the user's cap, else 300."""
    level = budget if budget in LEVELS else DEFAULT_LEVEL
    return caps.get(level, DEFAULT_MAX_CANDIDATES)
