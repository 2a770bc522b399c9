"""Reading Hindsight's recall traces, on responses captured from a real Hindsight 1.1.0: durations that must be
durations, and the facts that replay its ordering id for id."""

from __future__ import annotations

import math

import pytest

from autotune.hindsight.trace import pool_facts, positive_seconds, recall_pool, rerank_phase_seconds
from tests.support.captured import captured_queries, captured_recall


@pytest.mark.parametrize("query", captured_queries())
def test_a_captured_recall_replays_to_the_results_hindsight_returned(query):
    response = captured_recall(query)
    reranked = response["trace"]["reranked"]
    facts = pool_facts(response, "o200k_base")
    pool = recall_pool(facts, [str(c["node_id"]) for c in reranked])
    kept = pool.kept(None)
    raw = [c["score_components"]["cross_encoder_score"] for c in reranked]
    assert pool.results(kept, [raw[i] for i in kept]) == [str(r["id"]) for r in response["results"]]
    assert len(response["results"]) < len(reranked)  # the token budget bound: the order decided what was cut


def test_facts_carry_no_text():
    facts = pool_facts(captured_recall(), "o200k_base")
    texts = {c["text"] for c in captured_recall()["trace"]["reranked"]}
    assert not any(isinstance(v, str) and v in texts for v in facts.values())
    assert all(isinstance(n, int) and n > 0 for n in facts["text_tokens"])


def test_the_reranking_phase_is_read_and_must_be_a_duration():
    response = captured_recall(rerank_s=0.25)
    assert rerank_phase_seconds(response["trace"]) == 0.25
    assert rerank_phase_seconds({"summary": {"phase_metrics": []}}) is None
    with pytest.raises(ValueError, match="duration_seconds"):
        rerank_phase_seconds(captured_recall(rerank_s=-1.0)["trace"])


@pytest.mark.parametrize("value", [math.nan, math.inf, 1e308, -1.0, 0.0, True, "5", None, 10**400])
def test_what_is_not_a_duration_is_refused_by_name(value):
    with pytest.raises(ValueError, match="the phase"):
        positive_seconds(value, "the phase")


def test_a_pool_without_its_fused_list_cannot_replay():
    response = captured_recall()
    del response["trace"]["rrf_merged"]
    with pytest.raises(ValueError, match="rrf_merged"):
        pool_facts(response, "o200k_base")
    with pytest.raises(ValueError, match="signals"):
        recall_pool({**pool_facts(captured_recall(), "o200k_base"), "signals": [[0.5]]}, ["a"])
