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
from tests.support.captured import captured_queries, captured_recall
from tests.support.http import JsonHandler, serving


class FakeHindsight11(JsonHandler):
    """Answers with recall responses captured from a real Hindsight 1.1.0 on the embedded default model (so its
    scores are the ones autotune's default reproduces), with a set reranking time."""

    rerank_s: ClassVar[float] = 0.2
    statuses: ClassVar[list[int]] = []
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self._json(200, {"api_version": "1.1.0", "features": {}})

    def do_POST(self) -> None:
        FakeHindsight11.paths.append(self.path)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.statuses:
            return self._json(self.statuses.pop(0), {"detail": "down"})
        self._json(200, captured_recall(body["query"], rerank_s=self.rerank_s, asked=body["query"]))


@pytest.fixture()
def hindsight() -> Iterator[str]:
    FakeHindsight11.statuses, FakeHindsight11.paths, FakeHindsight11.rerank_s = [], [], 0.2  # no test's state leaks
    with serving(FakeHindsight11) as url:
        yield url


def _queries(tmp_path: Path) -> Path:
    queries = tmp_path / "q.txt"
    queries.write_text("\n".join(captured_queries()) + "\n")
    return queries


def _record_before(tmp_path: Path, hindsight: str, queries: Path) -> Path:
    before = tmp_path / "before.jsonl"
    out = io.StringIO()
    FakeHindsight11.rerank_s = 0.4
    assert main(["record", "--url", hindsight, "--bank", "b", "--queries", str(queries), "-o", str(before),
                 "--model", "default"], stdout=out, stderr=io.StringIO()) == ExitStatus.OK
    assert "reproduce Hindsight's own scores" in out.getvalue(), out.getvalue()
    return before


def test_verify_reports_the_gain_and_exits_10_on_a_slowdown(tmp_path, hindsight):
    queries = _queries(tmp_path)
    before = _record_before(tmp_path, hindsight, queries)
    args = ["verify", "--url", hindsight, "--bank", "b", "--queries", str(queries), "--before", str(before),
            "--model", "default", "--rounds", "2"]
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
    before.write_text(json.dumps({"query": "Who is allergic to peanuts?", "budget": "mid",
                                  "documents": ["Maya is allergic to peanuts"], "hindsight_rerank_s": 1.0}) + "\n")
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
