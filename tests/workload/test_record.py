from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.workload.queries import load_workload
from autotune.workload.record import line_from_recall, record_from_server, render_document
from tests.support.captured import captured_queries, captured_recall
from tests.support.http import JsonHandler, serving

SECRET = "sk-do-not-leak-42"


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


class FakeHindsight(JsonHandler):
    """Answers every recall with a response captured from a real Hindsight 1.1.0, under the query it was asked."""

    seen_auth: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self._json(200, {"version": "1.1.0"}) if self.path == "/version" else self._json(404, {})

    def do_POST(self) -> None:
        FakeHindsight.seen_auth.append(self.headers.get("authorization", ""))
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        assert self.path == "/v1/default/banks/bank1/memories/recall" and body["trace"] is True
        if body["query"] == "explode":
            return self._json(500, {"detail": "boom"})
        if body["query"] == "slow":
            time.sleep(1.5)
        self._json(200, captured_recall(asked=body["query"]))


@pytest.fixture()
def hindsight() -> Iterator[str]:
    FakeHindsight.seen_auth = []  # each test sees only its own requests
    with serving(FakeHindsight) as url:
        yield url


def test_record_skips_failures_and_replays(tmp_path, hindsight, monkeypatch):
    queries = tmp_path / "queries.txt"
    queries.write_text("what does alice drink\nexplode\nslow\nwhen is the meeting\n")
    out = tmp_path / "queries.jsonl"
    monkeypatch.setenv("HINDSIGHT_API_KEY", SECRET)
    stdout, stderr = io.StringIO(), io.StringIO()
    status = main(["record", "--url", hindsight, "--bank", "bank1", "--queries", str(queries), "--budget", "low,mid",
                   "--timeout", "0.5", "--retries", "1", "-o", str(out)], stdout=stdout, stderr=stderr)
    assert status == ExitStatus.UPSTREAM
    text = stdout.getvalue()
    assert "recorded 4 recalls" in text and "HTTP 500" in text and "timed out" in text
    assert SECRET not in text + stderr.getvalue() + out.read_text()
    assert all(a == f"Bearer {SECRET}" for a in FakeHindsight.seen_auth)
    workload = load_workload(out)  # the output passes `autotune run`'s validator
    assert len(workload.queries) == 4 and workload.queries[0].extra["hindsight_version"] == "1.1.0"
    # --resume skips what is there, and retries what failed
    report = record_from_server(hindsight, "bank1", ["what does alice drink", "new one"], ["low"], out,
                                api_key=None, resume=True, timeout_s=5)
    assert report.skipped_existing == 1 and report.written == 1


def test_resume_drops_a_torn_last_line(tmp_path, hindsight):
    out = tmp_path / "q.jsonl"
    good = json.dumps(line_from_recall(captured_recall(asked="a"), budget="mid", version=None))
    out.write_text(good + "\n" + good[:20])
    report = record_from_server(hindsight, "bank1", ["a", "b"], ["mid"], out, api_key=None, resume=True)
    assert report.skipped_existing == 1 and report.written == 1
    assert len(load_workload(out).queries) == 2


def test_existing_output_needs_resume(tmp_path, hindsight):
    queries, out = tmp_path / "queries.txt", tmp_path / "q.jsonl"
    queries.write_text("what does alice drink\n")
    out.write_text('{"query": "mine", "documents": ["kept"]}\n')
    err = io.StringIO()
    status = main(["record", "--url", hindsight, "--bank", "bank1", "--queries", str(queries), "-o", str(out)],
                  stdout=io.StringIO(), stderr=err)
    assert status == ExitStatus.BAD_OPTIONS and "--resume" in err.getvalue(), err.getvalue()
    assert out.read_text() == '{"query": "mine", "documents": ["kept"]}\n' and FakeHindsight.seen_auth == []


def test_from_traces_directory(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    for i, q in enumerate(captured_queries()):
        (traces / f"{i}.json").write_text(json.dumps({**captured_recall(q), "budget": "high"}))
    (traces / "broken.json").write_text("{")
    out = tmp_path / "out.jsonl"
    stdout = io.StringIO()
    status = main(["record", "--from-traces", str(traces), "-o", str(out)], stdout=stdout, stderr=io.StringIO())
    assert status == ExitStatus.UPSTREAM and "broken.json" in stdout.getvalue()
    assert [q.query for q in load_workload(out).queries] == captured_queries()


def test_recorded_file_replays_in_run(tmp_path, tiny_model_dir):
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "0.json").write_text(json.dumps(captured_recall()))
    out = tmp_path / "q.jsonl"
    assert main(["record", "--from-traces", str(traces), "-o", str(out)], stdout=io.StringIO()) == 0
    args = ["run", "--workload", str(out), "--model", str(tiny_model_dir), "--trials", "3", "--repeats", "1",
            "--final-rounds", "1", "--env-file", str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "p"),
            "--no-compose", "--target", "tei"]
    err = io.StringIO()
    assert main(args, stdout=io.StringIO(), stderr=err) == ExitStatus.BAD_WORKLOAD  # another model's scores: refused
    assert "does not reproduce Hindsight's own scores" in err.getvalue() and not (tmp_path / ".env").exists()
    status = main([*args, "--accept-mismatch"], stdout=io.StringIO(), stderr=io.StringIO())
    assert status == 0 and Path(tmp_path / ".env").exists()


def test_url_needs_bank_and_queries(tmp_path):
    err = io.StringIO()
    status = main(["record", "--url", "http://127.0.0.1:9", "-o", str(tmp_path / "o.jsonl")], stdout=io.StringIO(),
                  stderr=err)
    assert status == ExitStatus.BAD_OPTIONS and "--bank" in err.getvalue()
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("url", ["localhost:8888", "http://u:p@[::1", "ftp://host/x", "http://"])
def test_a_url_that_is_not_http_is_refused_at_once_and_creates_nothing(tmp_path, url):
    """Issue 36, items 13 and 15: no scheme was retried 3 times; a broken IPv6 host raised InvalidURL."""
    (tmp_path / "q.txt").write_text("q\n")
    out, err = io.StringIO(), io.StringIO()
    status = main(["record", "--url", url, "--bank", "b", "--queries", str(tmp_path / "q.txt"), "-o",
                   str(tmp_path / "w.jsonl")], stdout=out, stderr=err)
    assert status == ExitStatus.BAD_OPTIONS and "--url" in err.getvalue(), err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1 and not (tmp_path / "w.jsonl").exists()


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
