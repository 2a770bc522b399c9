from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.workload.queries import load_workload
from autotune.workload.record import line_from_recall, record_from_server, render_document
from tests.support.captured import captured_recall
from tests.support.fake_hindsight import serve_record_fake


@pytest.fixture()
def hindsight() -> Iterator[str]:
    yield from serve_record_fake()


@pytest.mark.parametrize(("text", "context", "date", "expected"), [
    ("Alice likes tea", "chat", "2022-06-05T14:30:00+02:00",
     "[Date: June 05, 2022 (2022-06-05)] chat: Alice likes tea"),
    ("Alice likes tea", "", "2022-06-05", "[Date: June 05, 2022 (2022-06-05)] Alice likes tea"),
    ("Alice likes tea", "chat", None, "chat: Alice likes tea"),
    ("Alice likes tea", None, None, "Alice likes tea"),
    ("x", None, "2024-12-31T23:59:59Z", "[Date: December 31, 2024 (2024-12-31)] x"),
    ("x", None, "not a date", "x"),
])
def test_document_rule_matches_hindsight(text, context, date, expected):
    assert render_document(text, context, date) == expected


def recall_response(query: str, n: int = 3, *, with_optional: bool = True) -> dict:
    reranked = []
    hits = []
    for i in range(n):
        cand = {"node_id": f"n{i}", "text": f"memory {i} about {query}", "rerank_score": 0.5}
        if with_optional:
            cand["score_components"] = {"cross_encoder_score": 1.5 - i}
            hits.append({"node_id": f"n{i}", "text": cand["text"], "context": "chat" if i % 2 == 0 else "",
                         "event_date": f"2023-01-0{i + 1}T10:00:00Z" if i != 1 else None})
        reranked.append(cand)
    trace = {"query": {"query_text": query}, "reranked": reranked,
             "retrieval_results": [{"method_name": "semantic", "results": hits}],
             "summary": {"phase_metrics": [{"phase_name": "retrieval", "duration_seconds": 0.1},
                                           {"phase_name": "reranking", "duration_seconds": 0.42}]
                         if with_optional else []}}
    return {"results": [], "trace": trace}


def test_line_from_recall_joins_context_and_dates():
    line = line_from_recall(recall_response("tea"), budget="mid", version="0.9.1")
    assert line["documents"][0] == "[Date: January 01, 2023 (2023-01-01)] chat: memory 0 about tea"
    assert line["documents"][1] == "memory 1 about tea"
    assert line["hindsight_rerank_s"] == 0.42 and line["hindsight_scores"] == [1.5, 0.5, -0.5]
    assert line["candidates"] == 3 and line["budget"] == "mid" and line["hindsight_version"] == "0.9.1"
    bare = line_from_recall(recall_response("tea", with_optional=False), budget=None, version=None)
    assert "hindsight_scores" not in bare and "hindsight_rerank_s" not in bare
    with pytest.raises(ValueError, match="trace"):
        line_from_recall({"results": []}, budget=None, version=None)


def test_a_real_recall_becomes_a_line_of_its_own_pairs_and_scores():
    """On a response captured from Hindsight 1.1.0: one document per reranked candidate, in its order, with its
    cross-encoder score, and the reranking phase's time."""
    response = captured_recall()
    trace = response["trace"]
    line = line_from_recall(response, budget="mid", version="1.1.0")
    assert line["query"] == trace["query"]["query_text"]
    assert line["candidates"] == len(line["documents"]) == len(trace["reranked"]) > 10
    assert line["hindsight_scores"] == [c["score_components"]["cross_encoder_score"] for c in trace["reranked"]]
    assert line["hindsight_rerank_s"] == next(p["duration_seconds"] for p in trace["summary"]["phase_metrics"]
                                              if p["phase_name"] == "reranking")
    for document, candidate in zip(line["documents"], trace["reranked"], strict=True):
        assert document.endswith(candidate["text"])  # after Hindsight's date and context prefixes


def test_resume_drops_a_torn_last_line(tmp_path, hindsight):
    out = tmp_path / "q.jsonl"
    good = json.dumps(line_from_recall(captured_recall(asked="a"), budget="mid", version=None))
    out.write_text(good + "\n" + good[:20])
    report = record_from_server(hindsight, "bank1", ["a", "b"], ["mid"], out, api_key=None, resume=True)
    assert report.skipped_existing == 1 and report.written == 1
    assert len(load_workload(out).queries) == 2


def test_a_record_that_wrote_nothing_leaves_no_file_to_block_the_next(tmp_path):
    """Issue 36, item 15: a failed first record left an empty file, and the same command then said 'exists'."""
    (tmp_path / "q.txt").write_text("q\n")
    args = ["record", "--url", "http://127.0.0.1:9", "--bank", "b", "--queries", str(tmp_path / "q.txt"), "-o",
            str(tmp_path / "w.jsonl"), "--retries", "0", "--timeout", "2"]
    first = main(args, stdout=io.StringIO(), stderr=io.StringIO())
    assert first == ExitStatus.UPSTREAM and not (tmp_path / "w.jsonl").exists()
    err = io.StringIO()
    assert main(args, stdout=io.StringIO(), stderr=err) == ExitStatus.UPSTREAM and "exists" not in err.getvalue()


def test_record_says_what_limits_a_replay():
    from autotune.workload.record import replay_notes

    good = {"replay": {"reproduced": True}}
    assert replay_notes([good, good]) == []
    notes = replay_notes([{}, {"replay": {"reproduced": True, "recorded_cap": 300}},
                          {"replay": {"reproduced": True, "deadline_zeros": 4}},
                          {"replay": {"reproduced": False, "boosted": True}}])
    text = "\n".join(notes)
    assert "1 recall(s) carry no fused pool" in text
    assert "MAX_CANDIDATES 300" in text and "ONNX_TIMEOUT=0" in text and "4 candidate(s)" in text
    assert "RECALL_STRATEGY_BOOSTS" in text and "1 of 3 recall(s) do not come out" in text
