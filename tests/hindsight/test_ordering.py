"""`hindsight.ordering` against Hindsight 1.1.0's own classes, on random pools: the trim, the rerank's
normalisation and sort, combined scoring, the cut to twice the thinking budget and the token-budget fill."""

from __future__ import annotations

import asyncio
import datetime as dt
import random

import pytest

from autotune.hindsight.ordering import CapTooLarge, RecallPool, Signals, agreement, fill_budget

hindsight = pytest.importorskip("hindsight_api", reason="the `hindsight` extra holds Hindsight's own classes")

from hindsight_api.engine.fact_budget import select_facts_within_budget  # noqa: E402
from hindsight_api.engine.search.recall_boost import trim_merged_candidates  # noqa: E402
from hindsight_api.engine.search.reranking import CrossEncoderReranker, apply_combined_scoring  # noqa: E402
from hindsight_api.engine.search.types import MergedCandidate, RetrievalResult  # noqa: E402
from hindsight_api.engine.token_encoding import count_tokens  # noqa: E402

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)
WORDS = ["the", "boiler", "deploy", "freeze", "maya", "peanut", "car", "insurance", "renewal", "churn",
         "analysis", "staging", "restart"]


class FixedScores:
    """A cross-encoder whose score for a document is fixed in advance (Hindsight's rerank calls `predict`)."""

    provider_name = "onnx"
    prunes_candidates = False

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    async def predict(self, pairs):
        return [self.scores[doc.split("] ")[-1]] for _query, doc in pairs]


def random_pool(rng: random.Random, n: int, logits: bool):
    candidates, scores = [], {}
    for i in range(n):
        text = f"{i} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60)))
        start = NOW - dt.timedelta(days=rng.randint(0, 800)) if rng.random() < 0.4 else None
        retrieval = RetrievalResult(id=f"n{i}", text=text, fact_type="world", occurred_start=start,
                                    temporal_proximity=rng.random() if rng.random() < 0.3 else None,
                                    proof_count=rng.randint(1, 40) if rng.random() < 0.2 else None)
        rrf = round(rng.choice([1 / 61, 1 / 62, 2 / 63, 1 / 70]) + rng.random() * 0.01 * (rng.random() < 0.7), 6)
        candidates.append(MergedCandidate(retrieval=retrieval, rrf_score=rrf))
        score = rng.gauss(0, 4) if logits else rng.random()
        scores[text] = float(round(score)) if rng.random() < 0.4 else score  # ties, on purpose
    return candidates, scores


def hindsights_results(candidates, scores, cap, thinking_budget, max_tokens):
    kept = trim_merged_candidates(list(candidates), cap, {}).kept
    reranked = asyncio.run(CrossEncoderReranker(FixedScores(scores)).rerank("q", kept, now=NOW)).results
    apply_combined_scoring(reranked, now=NOW)
    reranked.sort(key=lambda sr: sr.weight, reverse=True)
    top = reranked[: thinking_budget * 2]
    chosen = select_facts_within_budget(fact_ids_ordered=[sr.id for sr in top],
                                        text_by_id={sr.id: sr.retrieval.text for sr in top},
                                        max_tokens=max_tokens, count_tokens=count_tokens)
    return kept, {sr.id: sr for sr in reranked}, chosen.ids


@pytest.mark.parametrize("seed", range(12))
def test_the_replay_returns_what_hindsight_returns(seed):
    rng = random.Random(seed)
    n = rng.randint(5, 120)
    candidates, scores = random_pool(rng, n, logits=seed % 3 != 0)
    thinking_budget, max_tokens = rng.choice([(5, 4096), (100, 4096), (300, 300), (300, 60), (2, 0)])
    # the recording: the whole pool reranked, with the boosts Hindsight computed for each candidate
    _kept, full, full_ids = hindsights_results(candidates, scores, n, thinking_budget, max_tokens)
    pool = RecallPool(node_ids=tuple(c.id for c in candidates),
                      signals=tuple(Signals(full[c.id].recency, full[c.id].temporal, full[c.id].proof_norm)
                                    for c in candidates),
                      text_tokens=tuple(count_tokens(c.retrieval.text) for c in candidates),
                      pool=tuple(c.id for c in candidates), rrf=tuple(c.rrf_score for c in candidates),
                      thinking_budget=thinking_budget, max_tokens=max_tokens)
    raw = [scores[c.retrieval.text] for c in candidates]
    assert pool.results(pool.kept(None), [raw[i] for i in pool.kept(None)]) == full_ids
    for cap in sorted({1, rng.randint(1, n), max(1, n // 3), n + 5}):
        kept, _, ids = hindsights_results(candidates, scores, cap, thinking_budget, max_tokens)
        mine = pool.kept(cap)
        assert [pool.node_ids[i] for i in mine] == [c.id for c in kept]
        assert pool.results(mine, [raw[i] for i in mine]) == ids, (seed, cap)


def test_a_cap_past_what_the_recording_scored_is_refused():
    pool = RecallPool(node_ids=("a", "b"), signals=(Signals(), Signals()), text_tokens=(1, 1),
                      pool=("a", "b", "c"), rrf=(0.3, 0.2, 0.1), thinking_budget=10, max_tokens=100)
    assert pool.scorable == 2 and [pool.node_ids[i] for i in pool.kept(2)] == ["a", "b"]
    with pytest.raises(CapTooLarge):
        pool.kept(3)
    with pytest.raises(ValueError, match="reranks nothing"):
        pool.kept(0)


def test_the_fill_skips_only_the_fact_that_does_not_fit_and_never_answers_empty():
    assert fill_budget([0, 1, 2], [5, 50, 5], 20) == [0, 2]
    assert fill_budget([1, 0], [5, 50], 4) == [1]
    assert fill_budget([0], [5], 0) == []


def test_agreement_is_the_share_of_the_reference_still_returned():
    assert agreement(["a", "b", "c", "d"], ["d", "a", "x"]) == 0.5
    assert agreement([], ["a"]) == 1.0
