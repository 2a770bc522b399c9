from __future__ import annotations

import pytest

from autotune.hindsight.versions import parse_version, rules_for
from autotune.workload.record import line_from_recall


@pytest.mark.parametrize(("text", "parsed"), [("1.1.0", (1, 1)), ("v0.9.3", (0, 9)), ("1.1.0rc2", (1, 1)),
                                               ("2", (2, 0)), ("", None), (None, None), ("dev", None)])
def test_parse_version(text, parsed):
    assert parse_version(text) == parsed


def test_rules_by_version_range():
    assert rules_for("0.9.3").date_source == "event_date"
    assert rules_for("1.0.9").date_source == "event_date"
    assert rules_for("1.1.0").date_source == "occurred_start"
    assert rules_for("3.0").date_source == "occurred_start"
    assert rules_for(None).date_source == "occurred_start"  # unknown: the newest, and the self-check tests it


def response_1_1() -> dict:
    """A Hindsight 1.1 recall with trace, as its API returns it: dates live on results[].occurred_start."""
    ids = ["a", "b", "c"]
    return {
        "results": [{"id": "a", "text": "Maya is allergic to peanuts", "occurred_start": None, "context": "chat"},
                    {"id": "b", "text": "Standup moved to 10am", "occurred_start": "2024-03-04T09:00:00+00:00"}],
        "trace": {
            "query": {"query_text": "what is Maya allergic to"},
            "retrieval_results": [{"method_name": "semantic", "results": [
                {"rank": i + 1, "node_id": n, "text": t, "context": c, "event_date": "2026-12-01T10:00:00Z",
                 "score": 0.5, "score_name": "similarity"}
                for i, (n, t, c) in enumerate(zip(ids, ["Maya is allergic to peanuts", "Standup moved to 10am",
                                                        "Bought oat milk"], ["chat", "", "shopping"],
                                                  strict=True))]}],
            "reranked": [{"node_id": n, "text": t, "rerank_score": 0.1, "rerank_rank": i + 1, "rrf_rank": i + 1,
                          "rank_change": 0, "score_components": {"cross_encoder_score": 2.0 - i,
                                                                 "cross_encoder_score_normalized": 0.5}}
                         for i, (n, t) in enumerate(zip(ids, ["Maya is allergic to peanuts", "Standup moved to 10am",
                                                              "Bought oat milk"], strict=True))],
            "summary": {"phase_metrics": [{"phase_name": "reranking", "duration_seconds": 0.25, "details": {}}]},
        },
    }


def test_hindsight_1_1_dates_by_occurred_start_and_never_by_event_date():
    line = line_from_recall(response_1_1(), budget="mid", version="1.1.0")
    assert line["documents"] == ["chat: Maya is allergic to peanuts",
                                 "[Date: March 04, 2024 (2024-03-04)] Standup moved to 10am",
                                 "shopping: Bought oat milk"]
    assert line["dated_by"] == "occurred_start" and line["dates_unknown"] == 1  # "c" is not among results[]
    assert line["hindsight_scores"] == [2.0, 1.0, 0.0] and line["hindsight_scores_normalized"] == [0.5] * 3


def test_older_hindsight_dates_by_event_date():
    line = line_from_recall(response_1_1(), budget="mid", version="0.9.3")
    assert all(d.startswith("[Date: December 01, 2026 (2026-12-01)]") for d in line["documents"])
    assert line["dated_by"] == "event_date" and "dates_unknown" not in line
