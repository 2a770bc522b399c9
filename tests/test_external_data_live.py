"""A real Hindsight 1.1.0 loads a model whose weights lie in `model.onnx_data` (issue 52): the model directory a
run emitted, fp32 and int8, through Hindsight's own `onnx` provider, answering a recall whose trace carries the
scores. The full-size graph (2.2 GB) takes the same path in `benchmarks/large_hindsight.py`."""

from __future__ import annotations

import json

import httpx
import pytest

from autotune.outputs.envfile import managed_values
from autotune.runtime.onnx_files import data_files
from tests.support.corpus import DOCS
from tests.support.real_hindsight import cli, memories, real_hindsight_or_skip

pytestmark = pytest.mark.slow  # a real Hindsight on PostgreSQL: minutes

QUERIES = "".join(json.dumps({"query": q, "documents": DOCS[i:] + DOCS[:i]}) + "\n"
                  for i, q in enumerate(["what is maya allergic to", "who is allergic", "tell me about rivers"]))


@pytest.fixture(scope="module")
def hindsight(tmp_path_factory: pytest.TempPathFactory):
    with real_hindsight_or_skip(tmp_path_factory.mktemp("hindsight")) as h:
        yield h


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_hindsight_loads_the_emitted_external_data_model_and_answers_a_recall(hindsight, external_model_dir,
                                                                           tmp_path, precision):
    (tmp_path / "queries.jsonl").write_text(QUERIES)
    env = tmp_path / ".env"
    status, out, err = cli("run", "--model", str(external_model_dir), "--workload", str(tmp_path / "queries.jsonl"),
                           "--env-file", str(env), "--profile-dir", str(tmp_path / "profiles"), "--model-out",
                           str(tmp_path / "models" / "tuned"), "--name", "tuned", "--no-compose", "--trials", "3",
                           "--repeats", "1", "--final-rounds", "2", "--precisions", precision)
    assert status == 0, out + err
    tuned = managed_values(env)
    model = tuned["HINDSIGHT_API_RERANKER_ONNX_MODEL_PATH"]
    assert [p.name for p in data_files(model)] == ["model.onnx_data"]
    url = hindsight.start(tuned)
    hindsight.retain(f"ext-{precision}", memories(40))
    answer = httpx.post(f"{url}/v1/default/banks/ext-{precision}/memories/recall", timeout=300,
                        json={"query": "What is Maya allergic to?", "budget": "low", "trace": True})
    assert answer.status_code == 200, answer.text
    reranked = answer.json()["trace"]["reranked"]
    assert reranked and all("score_components" in r for r in reranked)
    assert "Reranker: ONNX provider initialized" in hindsight.log.read_text()
