"""Issue 32 end to end: `autotune run` on a recording from a real Hindsight 1.1.0 chooses a pool cap for the
level it may, under the result-quality gate, writes only that key, and leaves the level the user fixed alone."""

from __future__ import annotations

import io
import json
from pathlib import Path

import yaml

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.gates.scope import CAP_GRID
from autotune.outputs.envfile import managed_values

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "hindsight_recall.jsonl"
KEY = "HINDSIGHT_API_RERANKER_MAX_CANDIDATES"


def test_run_caps_the_free_level_under_the_gate_and_respects_the_users_key(tmp_path):
    lines = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    big = [ln for ln in lines if len(ln["documents"]) > 50]  # pools a cap can cut
    assert {ln["budget"] for ln in big} == {"low", "mid"}
    # three of each level: what the test shows holds on them, in half the time (the suite's budget, issue 53)
    big = [ln for ln in big if ln["budget"] == "low"][:3] + [ln for ln in big if ln["budget"] == "mid"][:3]
    workload = tmp_path / "recorded.jsonl"
    workload.write_text("".join(json.dumps(ln) + "\n" for ln in big))
    env = tmp_path / ".env"
    env.write_text(f"HINDSIGHT_API_LLM_PROVIDER=none\n{KEY}_MID=40\n")
    out, err = io.StringIO(), io.StringIO()
    status = main(["run", "--workload", str(workload), "--env-file", str(env), "--profile-dir",
                   str(tmp_path / "profiles"), "--name", "pool", "--model-out", str(tmp_path / "models" / "pool"),
                   "--no-compose", "--trials", "2", "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0",
                   "--batch-sizes", "8,32", "--precisions", "fp32"], stdout=out, stderr=err)
    assert status == ExitStatus.OK, err.getvalue()
    text = out.getvalue()
    assert "How much Hindsight scores" in text
    written = managed_values(env)
    assert f"{KEY}_MID" not in written and KEY not in written  # the user's level, and never the flat key
    assert f"{KEY}_MID=40\n" in env.read_text()
    profile = yaml.safe_load((tmp_path / "profiles" / "pool.yaml").read_text())
    scope = profile["scope"]
    assert scope["fixed_by_user"]["max_candidates"] == {"mid": 40}
    assert scope["agreement"]["mean"] >= scope["gate"]["min_mean"] and scope["agreement"]["worst"] >= 0.8
    assert all(p["max_candidates"].get("mid") == 40 for p in scope["frontier"])
    low = scope["chosen"]["max_candidates"].get("low")
    if low is not None:  # a cap was chosen for the free level: written, from the grid, and fewer pairs scored
        assert written[f"{KEY}_LOW"] == str(low) and low in CAP_GRID
        assert scope["pairs"]["scored"] < scope["pairs"]["whole_pool"]
    else:
        assert scope["note"] and f"{KEY}_LOW" not in written
    assert all(int(v) > 0 for k, v in written.items() if "CANDIDATE" in k)  # Hindsight: 0 reranks nothing
