"""A real Hindsight 1.1.0 API, offline: record -> self-check -> run -> cut over -> verify, and a bad cutover.

Small on purpose (a few queries, few trials); `benchmarks/real_hindsight.py` runs the same flow at size. The run
is held to int8 (issue 44): Hindsight's `onnx` provider is handed the int8 model autotune chose, its live scores
must be what autotune's replay of that model gives (verify's self-check, batched and cut as the profile has
Hindsight do it), and its live results must keep the fp32 recording's to the floor.
"""

from __future__ import annotations

import re

import pytest

from tests.support.real_hindsight import cutover_flow, real_hindsight_or_skip

pytestmark = pytest.mark.slow  # a real Hindsight on PostgreSQL: minutes

QUERIES = ["What is Maya allergic to?", "When does the deployment freeze start and end?",
           "What happened with the boiler?", "How do I restart the staging environment?"]


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory):
    with real_hindsight_or_skip(tmp_path_factory.mktemp("hindsight")) as h:
        yield cutover_flow(h, tmp_path_factory.mktemp("work"), queries=QUERIES, budget="low", trials=3,
                           memories_n=120, rounds=2, precisions="int8",
                           run_args=("--refine-rounds", "0"))  # the cutover's flow, not the hill-climb (27 of 95 s)


def test_every_recorded_document_reproduces_hindsights_own_score(flow):
    check = flow["self_check"]
    assert check is not None and check.candidates == sum(flow["candidates"]) > 0
    assert check.passed and check.spearman_min == pytest.approx(1.0) and check.max_abs_logit <= 1e-4, check.summary()
    assert "reproduce Hindsight's own scores" in flow["before.jsonl:stdout"]


def test_the_cutover_is_measured_live_and_judged_by_its_ratio(flow):
    status, out, err = flow["verify"]
    assert "Hindsight 1.1.0" in out and "all HTTP 200" in out and "raw logits" in out
    ratio = float(re.search(r"([0-9.]+)x as fast \(", out).group(1))
    assert (status == 0) == (ratio >= 1.1), out + err
    assert flow["tuned_env"]["HINDSIGHT_API_RERANKER_PROVIDER"] == "onnx"


def test_a_bad_cutover_exits_10_with_one_line(flow):
    status, out, err = flow["verify_bad"]
    assert status == 10, out + err
    assert err.startswith("autotune: error: the cutover made reranking ") and len(err.strip().splitlines()) == 1
    assert "before/after" in out


def test_verify_compares_the_live_results_with_those_before_the_cutover(flow):
    """The run's gate promised the floor on the recording; live, on the same queries, the cutover keeps it."""
    _status, out, err = flow["verify"]
    line = next(ln for ln in out.splitlines() if ln.startswith("results: agreement mean"))
    mean = float(line.split("agreement mean ")[1].split(",")[0])
    scope = {k: v for k, v in flow["tuned_env"].items() if "CANDIDATES" in k or "PER_CANDIDATE" in k}
    assert mean >= 0.95, (line, scope)
    assert "changed what recalls return" not in err



def test_hindsight_runs_the_int8_model_and_scores_as_the_replay_predicted(flow):
    """The profile's int8 variant is what Hindsight loaded; every live score is the replay's, within the int8
    replay tolerance (a dynamic variant's scores moved with the batch Hindsight formed; a per-token one's do not)."""
    import yaml

    profile = yaml.safe_load((flow["work"] / "profiles" / "tuned.yaml").read_text())
    assert profile["config"]["precision"] == "int8" and profile["model"]["int8_variant"]["scales"]
    _status, out, _err = flow["verify"]
    line = next(ln for ln in out.splitlines() if ln.startswith("self-check:"))
    assert "reproduce Hindsight's own scores within 0.15 logits (int8)" in line, line
