"""Hindsight 1.1's recall after fusion, replayed: which candidates the reranker sees at a pool cap, and the
results it returns for any scores they get.

The one place that knows the order, so that every figure of result quality (the search's gate, `verify`) asks
the same question. Step by step, as `memory_engine.py` runs it:

1. **The trim** (`recall_boost.trim_merged_candidates`): a pool no larger than the cap stays in fusion order;
   a larger one is sorted stably by RRF score, highest first, and cut to the cap.
2. **The rerank** (`reranking.CrossEncoderReranker.rerank`): raw scores are used as they are when every one
   of the pool's lies in [0, 1], else through a sigmoid, so this depends on the pool; NaN counts as 0; the
   list is sorted stably by that score.
3. **Combined scoring** (`reranking.apply_combined_scoring`): the score times the recency, temporal and
   proof-count boosts, plus the strategy boost (`stage2`), then a stable sort by that weight.
4. **The cut** to twice the thinking budget, and **the token-budget fill** (`fact_budget`): in rank order,
   each fact whose text still fits `max_tokens` is kept; one that does not is skipped alone; when none fits,
   the first is returned whole.

Everything a candidate brings besides its score (its boosts, its text's token count) was recorded from the
trace, so only the scores change from one configuration to the next.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RECENCY_ALPHA = 0.2  # reranking._RECENCY_ALPHA
TEMPORAL_ALPHA = 0.2  # reranking._TEMPORAL_ALPHA
PROOF_COUNT_ALPHA = 0.1  # reranking._PROOF_COUNT_ALPHA
NEUTRAL = 0.5


@dataclass(frozen=True)
class Signals:
    """What Hindsight multiplies and adds to a candidate's normalised score (neutral: 0.5, 0.5, 0.5, 0)."""

    recency: float = NEUTRAL
    temporal: float = NEUTRAL
    proof_norm: float = NEUTRAL
    stage2: float = 0.0  # the strategy boost: the trace's rerank_score minus its combined_score

    def weight(self, norm: float) -> float:
        recency_boost = 1.0 + RECENCY_ALPHA * (self.recency - 0.5)
        temporal_boost = 1.0 + TEMPORAL_ALPHA * (self.temporal - 0.5)
        proof_boost = 1.0 + PROOF_COUNT_ALPHA * (self.proof_norm - 0.5)
        combined = norm * recency_boost * temporal_boost * proof_boost  # Hindsight's order of products
        return combined + self.stage2 if self.stage2 else combined


class CapTooLarge(ValueError):
    """The recording's pool was already cut below this cap: the candidates it would add were never scored."""


@dataclass(frozen=True)
class RecallPool:
    """One recorded recall, as far as the order after fusion needs it.

    `documents` are the candidates the recording has text (and so scores) for, in the workload's order;
    `pool` is the whole fused pool (node ids, in fusion order, with their RRF scores), which may be larger
    when the recording's own Hindsight trimmed it.
    """

    node_ids: tuple[str, ...]  # per document
    signals: tuple[Signals, ...]  # per document
    text_tokens: tuple[int, ...]  # per document: its memory's text, in Hindsight's token counting
    pool: tuple[str, ...]  # the fused pool, in fusion order
    rrf: tuple[float, ...]  # per pool member
    thinking_budget: int
    max_tokens: int

    def __post_init__(self) -> None:
        n = len(self.node_ids)
        if len(self.signals) != n or len(self.text_tokens) != n:
            raise ValueError("signals and text_tokens need one entry per document")
        if len(self.rrf) != len(self.pool):
            raise ValueError("rrf needs one score per pool member")
        missing = set(self.node_ids) - set(self.pool)
        if missing:
            raise ValueError(f"{len(missing)} scored candidate(s) are not in the fused pool")

    @property
    def scorable(self) -> int:
        """The largest cap this recording can replay: beyond it, candidates were never scored."""
        if len(self.pool) <= len(self.node_ids):
            return len(self.pool)
        have = set(self.node_ids)
        ranked = self._ranked()
        return next((i for i, node in enumerate(ranked) if node not in have), len(ranked))

    def full(self) -> list[int]:
        """The documents Hindsight reranked when this was recorded (the largest pool a replay can hold)."""
        return self.kept(None if len(self.pool) <= len(self.node_ids) else self.scorable)

    def kept(self, cap: int | None) -> list[int]:
        """The documents (indices) Hindsight reranks at this cap, in the order it hands them to the reranker."""
        if cap is not None and cap < 1:
            raise ValueError("a cap of 0 reranks nothing; Hindsight's smallest useful cap is 1")
        index = {node: i for i, node in enumerate(self.node_ids)}
        order = list(self.pool) if cap is None or len(self.pool) <= cap else self._ranked()[:cap]
        absent = [node for node in order if node not in index]
        if absent:
            raise CapTooLarge(f"the recording scored {len(self.node_ids)} of a pool of {len(self.pool)}: "
                              f"a cap of {cap} would add candidates it never scored")
        return [index[node] for node in order]

    def _ranked(self) -> list[str]:
        order = sorted(range(len(self.pool)), key=self.rrf.__getitem__, reverse=True)  # stable, as Python's is
        return [self.pool[i] for i in order]

    def results(self, kept: Sequence[int], raw: Sequence[float]) -> list[str]:
        """The node ids Hindsight returns, in order, when the `kept` documents score `raw` (one each)."""
        if len(kept) != len(raw):
            raise ValueError("one raw score per kept document")
        scores = [0.0 if math.isnan(float(s)) else float(s) for s in raw]
        if scores and min(scores) >= 0.0 and max(scores) <= 1.0:
            norms = list(scores)
        else:
            norms = [float(1 / (1 + np.exp(-s))) for s in scores]
        ranked = sorted(zip(kept, norms, strict=True), key=lambda pair: pair[1], reverse=True)
        weighted = [(doc, self.signals[doc].weight(norm)) for doc, norm in ranked]
        weighted.sort(key=lambda pair: pair[1], reverse=True)
        top = [doc for doc, _ in weighted[: self.thinking_budget * 2]]
        return [self.node_ids[doc] for doc in fill_budget(top, self.text_tokens, self.max_tokens)]


def fill_budget(ranked: Sequence[int], tokens: Sequence[int], max_tokens: int) -> list[int]:
    """`fact_budget.select_facts_within_budget`: spend `max_tokens` front to back; an oversized fact skips
    itself only; when nothing fits, the top-ranked fact alone (a non-positive budget selects nothing)."""
    selected: list[int] = []
    total = 0
    skipped = False
    for doc in ranked:
        if total + tokens[doc] > max_tokens:
            skipped = True
            continue
        total += tokens[doc]
        selected.append(doc)
    if not selected and skipped and max_tokens > 0:
        selected.append(ranked[0])
    return selected


def agreement(reference: Sequence[str], candidate: Sequence[str]) -> float:
    """The share of the reference's results that the candidate still returns (1.0 when there were none)."""
    if not reference:
        return 1.0
    kept = set(candidate)
    return sum(1 for node in reference if node in kept) / len(reference)
