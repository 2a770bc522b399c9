"""Committing a run's outputs: the staged model's tokenizer check sees only what the model can read."""

from __future__ import annotations

import io

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.outputs import commit as commit_module
from tests.conftest import DOCS, write_workload


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
    from autotune.outputs.commit import served_max_length

    burst = {"max_input_length": 2541, "model_max_length": 8192}
    assert served_max_length({"burst": burst}) == 2541
    assert served_max_length({"burst": {**burst, "max_input_length": 8192}}) is None  # the model's own
    assert served_max_length({"burst": None}) is None and served_max_length(None) is None
