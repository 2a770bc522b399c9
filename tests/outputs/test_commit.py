"""Committing a run's outputs: the staged model's tokenizer check sees only what the model can read."""

from __future__ import annotations

import io

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.outputs import commit as commit_module
from tests.support.corpus import DOCS
from tests.support.models import write_workload


def test_the_tokenizer_check_never_tokenizes_a_huge_document_whole(tmp_path, tiny_model_dir, monkeypatch):
    """Issue 36, item 11: a 50 MB document peaked at 7.6 GB RSS in the AutoTokenizer check, which tokenized it
    whole (HF truncation builds every overflow combination). It gets the pairs cut where truncation gives the
    same ids; the check still compares every pair."""
    huge = "lorem ipsum dolor sit amet " * 40_000  # about 1 MB: enough to see it reach the check whole
    workload = write_workload(tmp_path / "wl.jsonl", n_queries=2, docs=[huge, *DOCS[:3]])
    real_check, longest = commit_module.check_tokenizer, []

    def check(directory, pairs_by_query, *args):
        longest.append(max(len(text) for pairs in pairs_by_query for pair in pairs for text in pair))
        return real_check(directory, pairs_by_query, *args)

    monkeypatch.setattr(commit_module, "check_tokenizer", check)
    monkeypatch.chdir(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    status = main(["run", "--workload", str(workload), "--model", str(tiny_model_dir), "--trials", "2",
                   "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0", "--no-compose"],
                  stdout=out, stderr=err)
    assert status == ExitStatus.OK, err.getvalue()
    assert "gives autotune's ids on all 8 pairs" in out.getvalue(), out.getvalue()
    assert longest and longest[0] < len(huge) // 10


def test_the_sidecar_is_told_the_input_cut_only_when_its_burst_made_one():
    from autotune.search.memory_report import MemoryReport

    def report(burst):  # type: ignore[no-untyped-def]
        return MemoryReport(served_mb=100.0, estimated_mb=90.0, burst=burst, tuner_peak_rss_mb=500.0, budget_mb=2048)

    burst = {"max_input_length": 2541, "model_max_length": 8192}
    assert report(burst).served_max_length() == 2541
    assert report({**burst, "max_input_length": 8192}).served_max_length() is None  # the model's own
    assert report(None).served_max_length() is None
