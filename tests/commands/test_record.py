"""`autotune record` as a command: what it refuses, what it skips, resuming, and a recording `run` replays."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.workload.queries import load_workload
from autotune.workload.record import record_from_server
from tests.support.captured import captured_queries, captured_recall
from tests.support.fake_hindsight import SECRET, FakeHindsight, serve_record_fake


@pytest.fixture()
def hindsight() -> Iterator[str]:
    yield from serve_record_fake()


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


def test_an_env_file_that_is_not_there_is_refused_before_recording(tmp_path):
    (tmp_path / "q.txt").write_text("q\n")
    err = io.StringIO()
    status = main(["record", "--url", "http://127.0.0.1:9", "--bank", "b", "--queries", str(tmp_path / "q.txt"),
                   "-o", str(tmp_path / "o.jsonl"), "--model", "default", "--env-file", str(tmp_path / "none.env")],
                  stdout=io.StringIO(), stderr=err)
    assert status == ExitStatus.BAD_OPTIONS and "--env-file" in err.getvalue() and len(err.getvalue().splitlines()) == 1
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
