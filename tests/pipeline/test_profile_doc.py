"""What a profile says about the workload: hashes and counts, never its text. The same holds for everything else
a run leaves behind (the `.env`, the compose file, the study's journal) and for what it prints."""

from __future__ import annotations

import json

import yaml

from autotune.errors import ExitStatus
from tests.support.cli import FAST, outputs, run_cli

QUERY_MARK, DOC_MARK = "zebracorn-query", "quokkaplinth-doc"


def test_no_workload_text_leaves_the_run(tmp_path, monkeypatch, tiny_model_dir):
    monkeypatch.setenv("AUTOTUNE_STATE_DIR", str(tmp_path / "state"))
    workload = tmp_path / "w.jsonl"
    workload.write_text("".join(json.dumps({"query": f"{QUERY_MARK} {i}", "documents": [
        f"{DOC_MARK} {i} {j} " + "words " * j for j in range(6)]}) + "\n" for i in range(3)))
    status, out, err = run_cli(["run", "--workload", str(workload), "--model", str(tiny_model_dir), "--name", "node",
                                *FAST, *outputs(tmp_path)])
    assert status == ExitStatus.OK, err
    profile_path = tmp_path / "out" / "profiles" / "node.yaml"
    profile = yaml.safe_load(profile_path.read_text())
    summary = profile["workload"]
    assert len(summary["sha256"]) == 64 and summary["queries"] == 3
    left = [p for p in [*(tmp_path / "out").rglob("*"), *(tmp_path / "state").rglob("*")] if p.is_file()]
    assert profile_path in left and any(p.parent.name == "state" or "state" in p.parts for p in left)
    for text in [out, err, *(p.read_bytes().decode("utf-8", "replace") for p in left)]:
        assert QUERY_MARK not in text and DOC_MARK not in text
