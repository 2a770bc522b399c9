"""`autotune verify` as a command: its exit statuses and its one-line errors."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from autotune.cli import main
from autotune.errors import ExitStatus
from tests.support.cli import run_cli
from tests.support.fake_hindsight import FakeHindsight11, serve_verify_fake


@pytest.fixture()
def hindsight() -> Iterator[str]:
    yield from serve_verify_fake()


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


def test_a_connection_failure_names_the_url(tmp_path):
    (tmp_path / "q.txt").write_text("What is Maya allergic to?\n")
    (tmp_path / "before.jsonl").write_text('{"query": "What is Maya allergic to?", "documents": ["a"], '
                                           '"hindsight_rerank_s": 1.0}\n')
    status, _, err = run_cli(["verify", "--url", "http://127.0.0.1:9", "--bank", "b", "--queries",
                              str(tmp_path / "q.txt"), "--before", str(tmp_path / "before.jsonl")])
    assert status != 0 and "http://127.0.0.1:9" in err, err
