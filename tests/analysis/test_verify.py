"""`autotune verify` against a Hindsight 1.1-shaped server whose reranker is autotune's own engine."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.runtime.engine import REFERENCE
from autotune.runtime.model import load_model_dir
from autotune.runtime.sessions import EnginePool
from tests.support.http import JsonHandler, serving

MEMORIES = ["Maya is allergic to peanuts", "Standup moved to 10am", "Bought oat milk", "Alice drinks tea"]


class FakeHindsight11(JsonHandler):
    """Reranks with a real engine, dates nothing (occurred_start is null), reports a set reranking time."""

    rerank_s: ClassVar[float] = 0.2
    engine: ClassVar[object] = None
    statuses: ClassVar[list[int]] = []
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self._json(200, {"api_version": "1.1.0", "features": {}})

    def do_POST(self) -> None:
        FakeHindsight11.paths.append(self.path)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.statuses:
            return self._json(self.statuses.pop(0), {"detail": "down"})
        ids = [f"m{i}" for i in range(len(MEMORIES))]
        raw = self.engine.score(body["query"], MEMORIES).raw  # type: ignore[attr-defined]
        trace = {
            "query": {"query_text": body["query"]},
            "retrieval_results": [{"method_name": "semantic", "results": [
                {"rank": 1, "node_id": n, "text": t, "context": "", "event_date": "2026-12-01T00:00:00Z",
                 "score": 0.1, "score_name": "similarity"} for n, t in zip(ids, MEMORIES, strict=True)]}],
            "reranked": [{"node_id": n, "text": t, "rerank_score": 0.0, "rerank_rank": 1, "rrf_rank": 1,
                          "rank_change": 0, "score_components": {"cross_encoder_score": float(s)}}
                         for n, t, s in zip(ids, MEMORIES, raw, strict=True)],
            "summary": {"phase_metrics": [{"phase_name": "reranking", "duration_seconds": self.rerank_s}]},
        }
        self._json(200, {"results": [{"id": n, "text": t, "occurred_start": None}
                                     for n, t in zip(ids, MEMORIES, strict=True)], "trace": trace})


@pytest.fixture()
def hindsight(tiny_model_dir) -> Iterator[str]:
    FakeHindsight11.engine = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False).engine(REFERENCE)
    FakeHindsight11.statuses, FakeHindsight11.paths, FakeHindsight11.rerank_s = [], [], 0.2  # no test's state leaks
    with serving(FakeHindsight11) as url:
        yield url


def _record_before(tmp_path: Path, hindsight: str, queries: Path, model: Path) -> Path:
    before = tmp_path / "before.jsonl"
    out = io.StringIO()
    FakeHindsight11.rerank_s = 0.4
    assert main(["record", "--url", hindsight, "--bank", "b", "--queries", str(queries), "-o", str(before),
                 "--model", str(model)], stdout=out, stderr=io.StringIO()) == ExitStatus.OK
    assert "reproduce Hindsight's own scores" in out.getvalue(), out.getvalue()
    return before


def test_verify_reports_the_gain_and_exits_10_on_a_slowdown(tmp_path, hindsight, tiny_model_dir):
    queries = tmp_path / "q.txt"
    queries.write_text("what is Maya allergic to\nwhen is standup\n")
    before = _record_before(tmp_path, hindsight, queries, tiny_model_dir)
    args = ["verify", "--url", hindsight, "--bank", "b", "--queries", str(queries), "--before", str(before),
            "--model", str(tiny_model_dir), "--rounds", "2"]
    FakeHindsight11.rerank_s = 0.2
    out = io.StringIO()
    assert main(args, stdout=out, stderr=io.StringIO()) == ExitStatus.OK
    text = out.getvalue()
    assert "2.00x as fast" in text and "Hindsight 1.1.0" in text and "all HTTP 200" in text
    assert "reproduce Hindsight's own scores" in text
    FakeHindsight11.rerank_s = 0.75
    out, err = io.StringIO(), io.StringIO()
    assert main(args, stdout=out, stderr=err) == ExitStatus.REGRESSION
    assert err.getvalue().strip() == ("autotune: error: the cutover made reranking 0.53x as fast as before (below "
                                      "--min-gain 1.1): rerun autotune run on a quiet host, or revert")


def test_verify_fails_on_any_non_200_and_encodes_the_bank(tmp_path, hindsight):
    queries = tmp_path / "q.txt"
    queries.write_text("what is Maya allergic to\n")
    FakeHindsight11.statuses = [503]
    err = io.StringIO()
    status = main(["verify", "--url", hindsight, "--bank", "../admin/x?y=", "--queries", str(queries)],
                  stdout=io.StringIO(), stderr=err)
    assert status == ExitStatus.UPSTREAM and "HTTP 503" in err.getvalue()
    assert FakeHindsight11.paths == ["/v1/default/banks/..%2Fadmin%2Fx%3Fy%3D/memories/recall"]


@pytest.mark.parametrize("duration", [float("nan"), 1e308, -1.0, 0.0, "5"])
def test_a_server_timing_that_is_not_a_duration_is_one_line(hindsight, tmp_path, monkeypatch, duration):
    """Issue 36, item 5: NaN once gave exit 0 and "nanx as fast"; 0 gave ZeroDivisionError."""
    monkeypatch.setattr(FakeHindsight11, "rerank_s", duration)
    queries = tmp_path / "q.txt"
    queries.write_text("Who is allergic to peanuts?\n")
    before = tmp_path / "before.jsonl"
    before.write_text(json.dumps({"query": "Who is allergic to peanuts?", "budget": "mid", "documents": MEMORIES,
                                  "hindsight_rerank_s": 1.0}) + "\n")
    err = io.StringIO()
    status = main(["verify", "--url", hindsight, "--bank", "b", "--queries", str(queries), "--before", str(before),
                   "--rounds", "1"], stdout=io.StringIO(), stderr=err)
    assert status == ExitStatus.UPSTREAM, err.getvalue()
    assert "duration" in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1


@pytest.mark.parametrize("recorded", ["NaN", "-2", "0", "1e400"])
def test_a_recorded_timing_that_is_not_a_duration_is_one_line(hindsight, tmp_path, recorded):
    queries = tmp_path / "q.txt"
    queries.write_text("Who is allergic to peanuts?\n")
    before = tmp_path / "before.jsonl"
    before.write_text('{"query": "Who is allergic to peanuts?", "budget": "mid", "documents": ["a"], '
                      f'"hindsight_rerank_s": {recorded}}}\n')
    err = io.StringIO()
    status = main(["verify", "--url", hindsight, "--bank", "b", "--queries", str(queries), "--before", str(before)],
                  stdout=io.StringIO(), stderr=err)
    assert status == ExitStatus.BAD_WORKLOAD and "hindsight_rerank_s" in err.getvalue(), err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1
