"""Hindsight's `MAX_TOKENS_PER_CANDIDATE`, replayed: documents cut before the reranker sees them.

When the user's `.env` sets `HINDSIGHT_API_RERANKER_MAX_TOKENS_PER_CANDIDATE`, Hindsight truncates
every candidate document (not the query) to that many tokens of its own text tokenizer
(`HINDSIGHT_API_TOKENIZER_ENCODING`, `o200k_base` by default) through `toktok`, before any
provider tokenizes the pair. The replay does exactly that, with the same library, so that what is
measured is what Hindsight will score.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from autotune.errors import OptionsError
from autotune.fileio import sha256_bytes
from autotune.hindsight.keys import DEFAULT_ENCODING, TOKENIZER_ENCODING, TOKENS_PER_CANDIDATE
from autotune.workload.queries import Workload

CAP_KEY = TOKENS_PER_CANDIDATE
ENCODING_KEY = TOKENIZER_ENCODING


@dataclass(frozen=True)
class CandidateCap:
    max_tokens: int
    encoding: str

    def to_dict(self) -> dict[str, Any]:
        return {"max_tokens_per_candidate": self.max_tokens, "encoding": self.encoding}


def cap_from_env(env: dict[str, str]) -> CandidateCap | None:
    """The cap the user's `.env` sets (as Hindsight parses it: `int()`), or None."""
    raw = env.get(CAP_KEY, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionsError(f"{CAP_KEY} in the .env is not an integer, so Hindsight would not start") from None
    if value < 1:
        raise OptionsError(f"{CAP_KEY} in the .env must be at least 1, got {value}")
    return CandidateCap(value, env.get(ENCODING_KEY, "").strip() or DEFAULT_ENCODING)


def apply_cap(workload: Workload, cap: CandidateCap) -> Workload:
    """The workload as Hindsight hands it to the reranker: each document cut to `cap.max_tokens`.

    Its hash names the cut as well as the file, so that nothing cached for the uncut workload (the
    fp32 reference, a study) is ever taken for it.
    """
    queries = [replace(q, documents=cut_documents(q.documents, cap.max_tokens, cap.encoding))
               for q in workload.queries]
    identity = f"{workload.sha256}|{cap.max_tokens}|{cap.encoding}".encode()
    return replace(workload, queries=queries, sha256=sha256_bytes(identity))


def cut_documents(documents: list[str], max_tokens: int, encoding: str) -> list[str]:
    """Each document cut to `max_tokens` tokens of `encoding`, with Hindsight's own library."""
    import toktok

    try:
        return [text for text, _count in toktok.batch_truncate(documents, max_tokens, encoding)]
    except Exception as exc:  # toktok raises on an encoding it does not bundle
        raise OptionsError(f"{ENCODING_KEY}={encoding!r} is not an encoding Hindsight's tokenizer "
                           "knows (o200k_base, cl100k_base, o200k_harmony)") from exc
