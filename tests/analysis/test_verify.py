"""`autotune verify` against a Hindsight 1.1-shaped server whose reranker is autotune's own engine."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotune.cli import main
from autotune.errors import ExitStatus
from tests.support.captured import captured_queries
from tests.support.fake_hindsight import FakeHindsight11, serve_verify_fake


@pytest.fixture()
def hindsight() -> Iterator[str]:
    yield from serve_verify_fake()


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




def test_the_self_check_replays_as_the_profiles_hindsight_batches():
    """An int8 score depends on the batch it was scored in (activations are scaled per batch): verify's replay
    takes the profile's batch size and its target's sort, not batch 1."""
    from autotune.analysis.verify import profile_batching
    from autotune.runtime.engine import EngineConfig

    config = EngineConfig(batch_size=4, intra_op_threads=2, length_sort=True, precision="int8")
    batching = profile_batching({"schema": 1, "target": "onnx", "config": config.to_dict()})
    assert batching is not None and batching[0] == config and batching[1] == "chars_desc"
    assert profile_batching(None) is None


def test_the_self_check_cuts_documents_as_the_profiles_hindsight_does():
    """A profile that sets MAX_TOKENS_PER_CANDIDATE (or was tuned under a .env that set it) has Hindsight score
    documents cut: verify's replay cuts them the same."""
    from autotune.analysis.verify import profile_cap
    from autotune.workload.candidate_cap import CandidateCap

    own = {"env": {"HINDSIGHT_API_RERANKER_MAX_TOKENS_PER_CANDIDATE": "64"}}
    assert profile_cap(own) == CandidateCap(64, "o200k_base")
    users = {"env": {}, "workload": {"candidate_cap": {"max_tokens_per_candidate": 200, "encoding": "cl100k_base"}}}
    assert profile_cap(users) == CandidateCap(200, "cl100k_base")
    assert profile_cap({"env": {}, "workload": {"candidate_cap": None}}) is None and profile_cap(None) is None
