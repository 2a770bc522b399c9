"""Issue 37: the memory budget holds on every target. A ModernBERT export with 8192 positions and one pair far past
512 tokens, tuned for `tei` under 8 concurrent recalls, once passed 4 GB against a 2 GB budget (its race held every
finalist's worker sessions, Hindsight's defaults raced past the budget, and BERT's formula under-counted its
activations threefold)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.corpus import DOCS

pytestmark = pytest.mark.slow  # a long-context model under load: about a minute

ROOT = Path(__file__).resolve().parents[2]
BUDGET_MB = 2048


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    from tests.runtime.test_families import FAMILIES, LONG_DOC, export

    tmp_path = tmp_path_factory.mktemp("budget")
    model = tmp_path / "modernbert"
    model.mkdir()
    export(next(f for f in FAMILIES if f.model_type == "modernbert"), model)
    docs = [*DOCS[:6], LONG_DOC]
    workload = tmp_path / "queries.jsonl"
    workload.write_text("".join(json.dumps({"query": "what is the capital of france",
                                            "documents": docs[i % 3:] + docs[:i % 3]}) + "\n" for i in range(4)))
    done = subprocess.run(
        [sys.executable, "-m", "autotune", "run", "--workload", str(workload), "--model", str(model), "--target", "tei",
         "--concurrency", "8", "--max-memory", str(BUDGET_MB), "--trials", "4", "--repeats", "1", "--final-rounds",
         "1", "--env-file", str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "profiles"), "--name", "mb",
         "--no-compose"],
        capture_output=True, text=True, cwd=tmp_path, timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    return tmp_path, done


def test_tei_under_8_concurrent_recalls_stays_within_the_budget(tuned):
    tmp_path, done = tuned
    memory = yaml.safe_load((tmp_path / "profiles" / "mb.yaml").read_text())["memory"]
    assert memory["budget_mb"] == BUDGET_MB
    assert memory["tuner_peak_rss_mb"] <= BUDGET_MB, memory
    assert f"budget {BUDGET_MB} MB" in done.stdout


def test_serve_under_8_concurrent_longest_requests_stays_within_the_profile(tuned):
    """The profile's burst figure is what `serve` holds at worst: 8 requests at once, every text past the model's
    8192 positions. Its input cut is what keeps that within the budget: uncut, this server passed 17.5 GB."""
    from tests.support.burst import serve_burst

    tmp_path, done = tuned
    profile = tmp_path / "profiles" / "mb.yaml"
    burst = yaml.safe_load(profile.read_text())["memory"]["burst"]
    assert burst["model_max_length"] == 8192 and burst["max_input_length"] < 8192, burst
    assert burst["within_budget"] and burst["peak_mb"] <= BUDGET_MB, burst
    assert f"inputs are cut to {burst['max_input_length']} tokens" in done.stdout
    assert f"AUTOTUNE_MAX_INPUT_LENGTH={burst['max_input_length']}" in (tmp_path / ".env").read_text()
    served = serve_burst(profile, ceiling_mb=3 * BUDGET_MB)
    assert served.info["max_input_length"] == burst["max_input_length"]
    assert served.statuses == [200] * 8
    assert served.peak_mb <= burst["peak_mb"] * 1.1, (served.peak_mb, burst)
